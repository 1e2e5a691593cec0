package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// buildVersion changes the seed (as a migration change would) and builds,
// returning the new golden's key.
func buildVersion(t *testing.T, e *env, n int) string {
	t.Helper()
	seed := fmt.Sprintf("insert into items(name) select 'v%d ' || g from generate_series(1, 100) g;\n", n)
	if err := os.WriteFile(filepath.Join(e.proj, "seed", "01.sql"), []byte(seed), 0o644); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Key string `json:"key"`
	}
	r := e.mustRun("build", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Key) != 64 {
		t.Fatalf("build --json: %v: %s", err, r.stdout)
	}
	return out.Key
}

func goldenKeys(t *testing.T, e *env) map[string]bool {
	keys := map[string]bool{}
	for _, g := range e.ls().Goldens {
		keys[g.Key] = true
	}
	return keys
}

// The oscar case: every migration change leaves a golden behind. gc keeps
// each recipe's latest, what instances use and what is pinned.
func TestGCExpiresGoldens(t *testing.T) {
	e := newEnv(t)
	var keys []string
	for i := 0; i < 5; i++ {
		keys = append(keys, buildVersion(t, e, i))
	}
	// keys[0] is pinned, keys[1] has a running instance.
	e.mustRun("pin", keys[0][:12])
	// up builds the current recipe; point it at keys[1]'s seed first.
	buildVersion(t, e, 1)
	up := e.mustRun("up", "--json")
	var inst struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(up.stdout), &inst); err != nil {
		t.Fatalf("up --json: %v: %s", err, up.stdout)
	}
	// The default rule keeps anything used in the last hour: nothing goes.
	if r := e.mustRun("gc"); strings.Contains(r.stdout, "removed golden") {
		t.Fatalf("gc removed a golden used minutes ago:\n%s", r.stdout)
	}
	// Last used: keys[1] (the rebuild), then 4, 3, 2, 0. Keep 2 → 1 and 4
	// by rank; 0 pinned; 3 and 2 go.
	r := e.mustRun("gc", "--keep", "2", "--min-idle", "0s")
	left := goldenKeys(t, e)
	for i, want := range []bool{true, true, false, false, true} {
		if left[keys[i]] != want {
			t.Errorf("golden %d (%s) kept=%v, want %v\ngc said:\n%s", i, keys[i][:12], left[keys[i]], want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "freed ") {
		t.Errorf("gc did not say what it freed:\n%s", r.stdout)
	}
	// A budget of one byte takes all but the pinned and the used one.
	e.mustRun("pin", "--remove", keys[0][:12])
	e.mustRun("gc", "--keep", "5", "--min-idle", "0s", "--budget", "1")
	left = goldenKeys(t, e)
	if len(left) != 1 || !left[keys[1]] {
		t.Errorf("after a 1-byte budget: %v, want only the golden instance %s uses (%s)", left, inst.ID, keys[1][:12])
	}
	e.mustRun("down", inst.ID)
	e.mustRun("gc", "--keep", "0", "--min-idle", "0s")
	if left = goldenKeys(t, e); len(left) != 0 {
		t.Errorf("gc --keep 0 with nothing in use left %v", left)
	}
	if r := e.run("gc", "--keep", "-1"); r.code != 2 || !strings.Contains(r.stderr, "--keep") {
		t.Errorf("gc --keep -1: exit %d, %q; want 2 and a line naming --keep", r.code, r.stderr)
	}
}

// The oscar case: a run step that imports Python migrations writes
// __pycache__ into its own input dir; the next build must not see new
// inputs. And --explain names what did change.
func TestBuildIgnoresByProductsAndExplains(t *testing.T) {
	e := newEnv(t)
	mig := filepath.Join(e.proj, "migrations")
	if err := os.MkdirAll(mig, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mig, "0001_init.py"), []byte("# one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// As the caller (files it writes belong to it), like `manage.py migrate`.
	recipe := `engine = "postgres"
database = "shop"
owner = "shop"

[[load]]
sql = ["schema.sql"]

[[load]]
name = "migrate"
run = "mkdir -p migrations/__pycache__ && date +%N > migrations/__pycache__/0001_init.cpython-311.pyc && date +%N > migrations/.0001_init.py.swp"
inputs = ["migrations"]
`
	if err := os.WriteFile(filepath.Join(e.proj, "dbfork.toml"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	first := e.mustRun("build", "--json")
	second := e.mustRun("build", "--json", "--explain")
	var a, b struct {
		Key   string `json:"key"`
		Built bool   `json:"built"`
	}
	json.Unmarshal([]byte(first.stdout), &a)
	json.Unmarshal([]byte(second.stdout), &b)
	if a.Key == "" || a.Key != b.Key || b.Built {
		t.Fatalf("the build's own __pycache__ changed the key: first %+v, second %+v", a, b)
	}
	if !strings.Contains(second.stderr, "reused golden "+a.Key[:12]) {
		t.Errorf("--explain on a reuse said %q", second.stderr)
	}
	if err := os.WriteFile(filepath.Join(mig, "0002_more.py"), []byte("# two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	third := e.mustRun("build", "--explain")
	for _, want := range []string{"built golden ", "since golden " + a.Key[:12], "added step 2 migrations/0002_more.py"} {
		if !strings.Contains(third.stderr, want) {
			t.Errorf("--explain after adding a migration: %q lacks %q", third.stderr, want)
		}
	}
}

// down --all cannot stop what a daemon's pool holds: it says so and exits
// non-zero instead of pretending all is down.
func TestDownAllSaysWhatItLeft(t *testing.T) {
	e := newEnv(t)
	f, err := os.OpenFile(filepath.Join(e.proj, "dbfork.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n[pool]\nmin = 1\nmax = 2\n")
	f.Close()
	c := e.cmd("serve", "-f", "dbfork.toml")
	out := &syncBuf{}
	c.Stderr = out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Signal(syscall.SIGTERM); _ = c.Wait() }()
	waitFor(t, func() bool { return len(e.ls().Instances) >= 1 })
	r := e.run("down", "--all")
	if r.code != 5 || !strings.Contains(r.stderr, "left running") || !strings.Contains(r.stderr, "dbfork daemon stop") {
		t.Fatalf("down --all with a pooled instance: exit %d, %q; want 5 and what to do", r.code, r.stderr)
	}
}
