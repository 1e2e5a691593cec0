package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/oci/ocitest"
)

// intermediateKey is the key of e's one intermediate golden.
func intermediateKey(t *testing.T, e *env) string {
	t.Helper()
	var ls stepLs
	if err := json.Unmarshal([]byte(e.mustRun("ls", "--json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	for _, g := range ls.Goldens {
		if g.Intermediate != nil {
			return g.Key
		}
	}
	t.Fatalf("no intermediate golden in %+v", ls)
	return ""
}

func addCache(t *testing.T, e *env, line string) {
	t.Helper()
	f := filepath.Join(e.proj, "dbfork.toml")
	body, _ := os.ReadFile(f)
	if err := os.WriteFile(f, append(body, []byte("\n[cache]\n"+line+"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The step cache travels: a recipe's [cache] pushes the states its build
// kept and another machine's build of a changed migration starts from
// the pulled one; push/pull --with-steps carry them by hand.
func TestStepCacheTravelsThroughTheRegistry(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/steps"

	a := newEnv(t)
	stepRecipe(t, a, "alter table items add column price int;\n")
	addCache(t, a, `to = "`+repo+`"`)
	a.mustRun("build", "--step-cache-min", "0")
	inter := intermediateKey(t, a)

	b := newEnv(t)
	stepRecipe(t, b, "alter table items add column price int default 7;\n")
	addCache(t, b, `from = "`+repo+`"`)
	r := b.mustRun("build", "-v")
	if want := "reused steps 1-1 from intermediate golden " + inter[:12]; !strings.Contains(r.stderr, want) {
		t.Fatalf("a build with [cache] from the repo: %q lacks %q", r.stderr, want)
	}
	if got := b.mustRun("run", "--", "psql", "-XAtc", "select count(*), min(price) from items").stdout; strings.TrimSpace(got) != "3000|7" {
		t.Fatalf("golden built from the pulled state: %q", got)
	}

	repo2 := reg.Host + "/goldens/bystep"
	c := newEnv(t)
	stepRecipe(t, c, "alter table items add column price int;\n")
	key := strings.TrimSpace(c.mustRun("build", "--step-cache-min", "0").stdout)
	c.mustRun("push", "--with-steps", repo2)
	d := newEnv(t)
	if r := d.mustRun("pull", "--with-steps", repo2+":"+key); !strings.Contains(r.stderr, "pulled intermediate golden "+inter[:12]) {
		t.Fatalf("pull --with-steps: %q", r.stderr)
	}
	if got := intermediateKey(t, d); got != inter {
		t.Fatalf("pulled intermediate %s, want %s", got, inter)
	}
	stepRecipe(t, d, "alter table items add column price int default 8;\n")
	if r := d.mustRun("build", "-v"); !strings.Contains(r.stderr, "reused steps 1-1 from intermediate golden "+inter[:12]) {
		t.Fatalf("build after pull --with-steps: %q", r.stderr)
	}
	for _, e := range []*env{a, b, c, d} {
		e.assertNothingLeft()
	}
}
