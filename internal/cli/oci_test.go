package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/oci/ocitest"
	"github.com/dbfork/dbfork/internal/testenv"
)

func (e *env) key() string {
	e.t.Helper()
	return strings.TrimSpace(e.mustRun("build").stdout)
}

func (e *env) count() string {
	e.t.Helper()
	r := e.mustRun("run", "--", "psql", "-XAtc", "select count(*) from items")
	return strings.TrimSpace(r.stdout)
}

// origin is what `ls --json` says golden key came from.
func (e *env) origin(key string) string {
	e.t.Helper()
	var out struct {
		Goldens []struct{ Key, Origin string }
	}
	if err := json.Unmarshal([]byte(e.mustRun("ls", "--json").stdout), &out); err != nil {
		e.t.Fatal(err)
	}
	for _, g := range out.Goldens {
		if g.Key == key {
			return g.Origin
		}
	}
	e.t.Fatalf("ls --json does not list %s", key)
	return ""
}

type buildOut struct {
	Key    string `json:"key"`
	Built  bool   `json:"built"`
	Pulled bool   `json:"pulled"`
}

func (e *env) buildJSON(args ...string) buildOut {
	e.t.Helper()
	var out buildOut
	r := e.mustRun(append([]string{"build", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("build --json: %v: %s", err, r.stdout)
	}
	return out
}

// Push from one store, pull into an empty one, clone and query; the same
// through export/import; the pulled golden is the recipe's (no build).
func TestPushPullCloneQuery(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	key := a.key()
	if out := strings.TrimSpace(a.mustRun("push", repo, "--tag", "main").stdout); out != repo+":"+key {
		t.Fatalf("push printed %q", out)
	}
	b := newEnv(t)
	if got := strings.TrimSpace(b.mustRun("pull", repo+":main").stdout); got != key {
		t.Fatalf("pull printed %q, want %s", got, key)
	}
	if out := b.buildJSON(); out.Key != key || out.Built {
		t.Fatalf("build after pull: %+v, want key %s not built", out, key)
	}
	if n := b.count(); n != "3001" {
		t.Fatalf("query on a clone of the pulled golden: %q", n)
	}
	b.mustRun("verify", key)
	if o := b.origin(key); !strings.HasPrefix(o, "pull "+repo+":main@sha256:") {
		t.Errorf("ls --json gives the pulled golden origin %q", o)
	}
	if o := a.origin(key); o != "build" {
		t.Errorf("ls --json gives the built golden origin %q", o)
	}

	file := filepath.Join(a.root, "shop.golden")
	a.mustRun("export", key, file)
	c := newEnv(t)
	if got := strings.TrimSpace(c.mustRun("import", file).stdout); got != key {
		t.Fatalf("import printed %q", got)
	}
	if n := c.count(); n != "3001" {
		t.Fatalf("query on a clone of the imported golden: %q", n)
	}
	if o := c.origin(key); !strings.HasPrefix(o, "import "+file+"@sha256:") {
		t.Errorf("ls --json gives the imported golden origin %q", o)
	}
	// Bad input: one line, nothing published.
	d := newEnv(t)
	for _, args := range [][]string{{"pull", repo}, {"pull", repo + ":nosuchtag"}, {"import", filepath.Join(a.root, "missing.tar")}, {"push", "not a ref"}} {
		r := d.run(args...)
		if r.code == 0 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.HasPrefix(r.stderr, "dbfork: ") {
			t.Errorf("dbfork %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if len(d.ls().Goldens) != 0 {
		t.Error("a failed pull published a golden")
	}
}

// A pull killed half-way leaves nothing visible; gc removes its work dir
// and the next pull works.
func TestPullKilledHalfway(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	key := a.key()
	a.mustRun("push", repo)
	b := newEnv(t)
	for _, phase := range []string{"pull:layer", "pull:downloaded", "pull:manifest"} {
		r := b.runEnv([]string{"DBFORK_CRASH_AT=" + phase}, "pull", repo+":"+key)
		if r.code != -1 && r.code != 137 {
			t.Fatalf("pull was not killed at %s: exit %d %s", phase, r.code, r.stderr)
		}
		if n := len(b.ls().Goldens); n != 0 {
			t.Fatalf("after a kill at %s: %d goldens visible", phase, n)
		}
		if len(testenv.TmpBuilds(b.store)) == 0 {
			t.Fatalf("after a kill at %s: no work dir left, so the kill came too late", phase)
		}
		b.mustRun("gc")
		if left := testenv.TmpBuilds(b.store); len(left) > 0 {
			t.Fatalf("gc left %v", left)
		}
	}
	b.mustRun("pull", repo+":"+key)
	if n := b.count(); n != "3001" {
		t.Fatalf("query after an interrupted pull and a new one: %q", n)
	}
}

// A recipe's [cache] makes a fresh store pull instead of build, and does
// not change the key; `build --cache-from` on a miss builds and says why.
func TestRecipeCache(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	plainKey := a.key()
	if out := a.buildJSON("--cache-from", repo); out.Pulled {
		t.Fatal("a store that has the golden pulled it")
	}
	b := newEnv(t)
	r := b.mustRun("build", "--cache-from", repo, "--cache-to", repo)
	if !strings.Contains(r.stderr, "has no golden") {
		t.Errorf("a cache miss was not explained: %q", r.stderr)
	}
	c := newEnv(t)
	recipe := filepath.Join(c.proj, "dbfork.toml")
	body, _ := os.ReadFile(recipe)
	if err := os.WriteFile(recipe, append(body, []byte("\n[cache]\nfrom = \""+repo+"\"\nto = \""+repo+"\"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := c.count(); n != "3001" {
		t.Fatalf("run with [cache]: %q", n)
	}
	out := c.buildJSON()
	if out.Key != plainKey || out.Built {
		t.Fatalf("with [cache]: %+v, want key %s (the key without [cache]) and no build", out, plainKey)
	}
	// Pulled, not built: c's golden is b's, build time and all.
	created := func(e *env) string {
		var m struct{ Created string }
		data, err := os.ReadFile(filepath.Join(e.store, "goldens", plainKey, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(data, &m)
		return m.Created
	}
	if created(c) != created(b) || created(b) == created(a) {
		t.Fatalf("golden created at %s in c, %s in b (pushed), %s in a", created(c), created(b), created(a))
	}
}

// A golden from another server version is refused, saying why; wrong
// credentials give one line.
func TestPullRefusals(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	key := a.key()
	// Pretend the golden came from another PostgreSQL release.
	mpath := filepath.Join(a.store, "goldens", key, "manifest.json")
	m, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var mm map[string]any
	_ = json.Unmarshal(m, &mm)
	mm["engine_version"] = "postgres (PostgreSQL) 15.99 (test)"
	m, _ = json.Marshal(mm)
	if err := os.WriteFile(mpath, m, 0o644); err != nil {
		t.Fatal(err)
	}
	a.mustRun("push", repo)
	b := newEnv(t)
	r := b.run("pull", repo+":"+key)
	if r.code == 0 || !strings.Contains(r.stderr, "15.99") || !strings.Contains(r.stderr, "key") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("pull of another server version: exit %d, %q", r.code, r.stderr)
	}
	if len(b.ls().Goldens) != 0 || len(testenv.TmpBuilds(b.store)) != 0 {
		t.Fatal("a refused pull left something in the store")
	}

	locked := ocitest.Start(t, ocitest.Options{User: "ci", Password: "right"})
	r = a.runEnv([]string{"DBFORK_REGISTRY_USER=ci", "DBFORK_REGISTRY_PASSWORD=wrong", "DBFORK_REGISTRY_HOST=" + locked.Host}, "push", locked.Host+"/goldens/shop")
	if r.code == 0 || !strings.HasPrefix(r.stderr, "dbfork: registry "+locked.Host+" refused access") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("push with a wrong password: exit %d, %q", r.code, r.stderr)
	}
	if r := a.runEnv([]string{"DBFORK_REGISTRY_USER=ci", "DBFORK_REGISTRY_PASSWORD=right", "DBFORK_REGISTRY_HOST=" + locked.Host}, "push", locked.Host+"/goldens/shop"); r.code != 0 {
		t.Fatalf("push with the right password for the named host: %q", r.stderr)
	}
}

// MariaDB goldens travel the same way.
func TestMariaDBPushPull(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/maria"
	a := mariadbEnv(t)
	key := a.key()
	a.mustRun("push", repo)
	b := mariadbEnv(t)
	b.mustRun("pull", repo+":"+key)
	if out := b.buildJSON(); out.Key != key || out.Built {
		t.Fatalf("build after pull: %+v, want key %s not built", out, key)
	}
	// The sealed redo log (256 MiB, nearly all zeros) comes back sparse.
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(b.store, "goldens", key, "data", "ib_logfile0"), &st); err != nil || st.Size != 256<<20 || st.Blocks*512 > 1<<20 {
		t.Fatalf("pulled redo log: %d bytes long, owning %d (%v); want 256 MiB owning < 1 MiB", st.Size, st.Blocks*512, err)
	}
	r := b.mustRun("run", "--", "sh", "-c", `mariadb -N -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "SELECT COUNT(*) FROM items"`)
	if n := strings.TrimSpace(r.stdout); n != "3001" {
		t.Fatalf("query on a clone of the pulled MariaDB golden: %q", n)
	}
}

// The daemon (what every test plugin talks to) pulls a recipe's [cache]
// instead of building.
func TestServePullsFromCache(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	key := a.key()
	a.mustRun("push", repo)
	c := newEnv(t)
	recipe := filepath.Join(c.proj, "dbfork.toml")
	body, _ := os.ReadFile(recipe)
	if err := os.WriteFile(recipe, append(body, []byte("\n[cache]\nfrom = \""+repo+"\"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	c.startServe()
	r := c.run("-v", "run", "--", "psql", "-XAtc", "select count(*) from items")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "3001" || !strings.Contains(r.stderr, "leased from dbfork serve") {
		t.Fatalf("run through serve: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	read := func(e *env) string {
		data, err := os.ReadFile(filepath.Join(e.store, "goldens", key, "manifest.json"))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	if read(c) != read(a) {
		t.Fatal("the daemon built the golden instead of pulling it")
	}
}
