package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type stepLs struct {
	Goldens []struct {
		Key          string `json:"key"`
		Intermediate *struct {
			Step  int `json:"step"`
			Steps int `json:"steps"`
		} `json:"intermediate"`
	} `json:"goldens"`
}

// A migration change rebuilds from the state after the seed: build -v
// says which steps were reused, ls marks the intermediate golden, doctor
// counts it, and gc keeps it while the recipe's kept golden was built
// through it.
func TestBuildReusesStepsAndListsThem(t *testing.T) {
	e := newEnv(t)
	recipe := `engine = "postgres"
database = "shop"
owner = "shop"

[[load]]
sql = ["schema.sql", "seed/*.sql"]

[[load]]
sql = ["migrate.sql"]
`
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(e.proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dbfork.toml", recipe)
	write("migrate.sql", "alter table items add column price int;\n")
	var first struct {
		Key         string `json:"key"`
		ReusedSteps int    `json:"reused_steps"`
	}
	r := e.mustRun("build", "--json", "--step-cache-min", "0")
	if err := json.Unmarshal([]byte(r.stdout), &first); err != nil || first.Key == "" || first.ReusedSteps != 0 {
		t.Fatalf("first build: %v %+v", err, first)
	}
	var ls stepLs
	if err := json.Unmarshal([]byte(e.mustRun("ls", "--json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	inter := ""
	for _, g := range ls.Goldens {
		if g.Intermediate != nil && g.Intermediate.Step == 1 && g.Intermediate.Steps == 2 {
			inter = g.Key
		}
	}
	if len(ls.Goldens) != 2 || inter == "" {
		t.Fatalf("ls after a build with the step cache: %+v", ls)
	}
	if table := e.mustRun("ls").stdout; !strings.Contains(table, inter[:12]) || !strings.Contains(table, "intermediate: after step 1/2") {
		t.Fatalf("ls does not mark the intermediate golden:\n%s", table)
	}
	var doc struct {
		Store struct {
			Goldens struct {
				Count, Intermediate int
				IntermediateBytes   int64 `json:"intermediate_bytes"`
			} `json:"goldens"`
		} `json:"store"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("doctor", "--json").stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if g := doc.Store.Goldens; g.Count != 1 || g.Intermediate != 1 || g.IntermediateBytes <= 0 {
		t.Fatalf("doctor's golden figures: %+v", g)
	}

	write("migrate.sql", "alter table items add column price int default 7;\n")
	second := e.mustRun("build", "-v", "--step-cache-min", "0")
	if want := "reused steps 1-1 from intermediate golden " + inter[:12]; !strings.Contains(second.stderr, want) {
		t.Fatalf("build -v after a migration change: %q lacks %q", second.stderr, want)
	}
	key := strings.TrimSpace(second.stdout)
	e.mustRun("gc", "--keep", "1", "--min-idle", "0")
	left := goldenKeys(t, e)
	if !left[key] || !left[inter] || left[first.Key] || len(left) != 2 {
		t.Fatalf("gc --keep 1 left %v; want the new golden %s and the intermediate %s it was built from", left, key[:12], inter[:12])
	}
}
