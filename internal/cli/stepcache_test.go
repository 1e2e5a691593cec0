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

// stepRecipe makes e's recipe a seed step and a migration step.
func stepRecipe(t *testing.T, e *env, migration string) {
	t.Helper()
	recipe := `engine = "postgres"
database = "shop"
owner = "shop"

[[load]]
sql = ["schema.sql", "seed/*.sql"]

[[load]]
sql = ["migrate.sql"]
`
	for name, body := range map[string]string{"dbfork.toml": recipe, "migrate.sql": migration} {
		if err := os.WriteFile(filepath.Join(e.proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A dbfork killed with SIGKILL at any phase of a build that keeps or
// reuses an intermediate golden leaves either nothing or complete
// goldens: what is visible verifies, gc leaves nothing behind, and the
// next build and run work.
func TestCrashDuringStepCache(t *testing.T) {
	phases := []struct {
		phase       string
		incremental bool // crash in a build that starts from an intermediate
		goldens     int  // visible after the crash
	}{
		{"step:stopped", false, 0},
		{"step:copied", false, 0},
		{"step:manifest", false, 0},
		{"step:published", false, 1},
		{"step:restarted", false, 1},
		{"build:cloned", true, 2},
		{"build:loaded", true, 2},
		{"build:manifest", true, 2},
		{"build:published", true, 3},
	}
	e := newEnv(t)
	for _, p := range phases {
		t.Run(p.phase, func(t *testing.T) {
			e.t = t
			for _, g := range e.ls().Goldens {
				removeGolden(t, e, g.Key)
			}
			stepRecipe(t, e, "alter table items add column price int;\n")
			if p.incremental {
				e.mustRun("build", "--step-cache-min", "0")
				stepRecipe(t, e, "alter table items add column price int default 3;\n")
			}
			r := e.runEnv([]string{"DBFORK_CRASH_AT=" + p.phase, "DBFORK_STEP_CACHE_MIN=0"}, "build")
			if r.code != -1 && r.code != 137 {
				t.Fatalf("dbfork was not killed at %s: exit %d, stderr %s", p.phase, r.code, r.stderr)
			}
			if n := len(e.ls().Goldens); n != p.goldens {
				t.Fatalf("after a crash at %s: %d goldens visible, want %d", p.phase, n, p.goldens)
			}
			if p.goldens > 0 {
				e.mustRun("verify") // every visible golden is complete
			}
			e.mustRun("gc")
			e.assertNothingLeft()
			b := e.mustRun("build", "-v", "--step-cache-min", "0")
			if p.goldens == 1 && !strings.Contains(b.stderr, "reused steps 1-1") {
				t.Fatalf("the build after a crash at %s did not start from the intermediate golden: %s", p.phase, b.stderr)
			}
			r = e.run("run", "--", "psql", "-XAtc", "select count(*), min(price) from items")
			want := "3000|"
			if p.incremental {
				want = "3000|3"
			}
			if r.code != 0 || strings.TrimSpace(r.stdout) != want {
				t.Fatalf("run after crash+gc: exit %d %q, want %q: %s", r.code, r.stdout, want, r.stderr)
			}
			e.assertNothingLeft()
		})
	}
}

// MariaDB: a full and an incremental build of the same recipe give the
// same key and the same dump (rows, schema, AUTO_INCREMENT counters and
// sequences).
func TestMariaDBStepCacheSameAsFullBuild(t *testing.T) {
	e := mariadbEnv(t)
	recipe := `engine = "mariadb"
database = "shop"
owner = "shop"

[[load]]
sql = "seed.sql"

[[load]]
sql = "migrate.sql"
`
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(e.proj, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("dbfork.toml", recipe)
	write("seed.sql", "CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text);\nINSERT INTO items(name) SELECT CONCAT('i', seq) FROM seq_1_to_3000;\n"+
		"CREATE SEQUENCE tickets;\nSELECT NEXTVAL(tickets) FROM seq_1_to_42;\n")
	write("migrate.sql", "ALTER TABLE items ADD COLUMN price int DEFAULT 1;\n")
	e.mustRun("build", "--step-cache-min", "0")
	write("migrate.sql", "ALTER TABLE items ADD COLUMN price int DEFAULT 2;\nINSERT INTO items(name) VALUES ('new');\nSELECT NEXTVAL(tickets);\n")
	inc := e.mustRun("build", "-v", "--step-cache-min", "0")
	if !strings.Contains(inc.stderr, "reused steps 1-1 from intermediate golden") {
		t.Fatalf("build -v after a migration change: %s", inc.stderr)
	}
	full := *e
	full.store = filepath.Join(e.root, "full-store")
	t.Cleanup(func() { full.run("gc", "--all") })
	if a, b := strings.TrimSpace(inc.stdout), strings.TrimSpace(full.mustRun("build", "--step-cache-min", "off").stdout); a != b {
		t.Fatalf("incremental build key %s, full build key %s", a, b)
	}
	dump := []string{"run", "--", "sh", "-c", `mariadb-dump --skip-dump-date --skip-comments -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" "$MYSQL_DATABASE"`}
	a, b := e.mustRun(dump...).stdout, full.mustRun(dump...).stdout
	if a != b || !strings.Contains(a, "`price` int(11) DEFAULT 2") || !strings.Contains(a, "'new',2)") || !strings.Contains(a, "SETVAL(`tickets`") {
		t.Fatalf("incremental and full build differ or lack the migration:\n--- incremental\n%s\n--- full\n%s", a, b)
	}
}
