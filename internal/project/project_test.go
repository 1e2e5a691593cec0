package project_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// newStore is a store in a directory the server user can reach.
func newStore(t *testing.T) (*store.Store, string) {
	t.Helper()
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

func query(t *testing.T, dsn, q string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

// One call builds the golden, the next finds it (in this project and in
// a new one, as another process would), an edited input makes a new one,
// and a clone of it carries the seed, the recipe's settings and the
// recipe's path.
func TestGoldenThenClone(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	s, root := newStore(t)
	proj := filepath.Join(root, "proj")
	path := testenv.WriteRecipe(t, proj, `
engine = "postgres"
[settings]
work_mem = "7MB"
[[load]]
sql = ["seed.sql"]
`, map[string]string{"seed.sql": "create table t(v text); insert into t values ('golden');\n"})
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := project.New(project.Options{Store: s})
	b, err := p.Golden(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Built || b.Golden == nil || b.Engine == nil || b.Recipe != r {
		t.Fatalf("first Golden: built %v, golden %v, engine %v", b.Built, b.Golden, b.Engine)
	}
	again, err := p.Golden(ctx, r)
	if err != nil || again.Built || again.Golden.Key != b.Golden.Key {
		t.Fatalf("second Golden: %v, built %v, key %s want %s", err, again.Built, again.Golden.Key, b.Golden.Key)
	}
	other, err := project.New(project.Options{Store: s}).Golden(ctx, r)
	if err != nil || other.Built || other.Golden.Key != b.Golden.Key {
		t.Fatalf("Golden of a new project: %v, built %v", err, other.Built)
	}

	in, err := p.Clone(ctx, b, instance.Options{Backend: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy(context.Background(), s)
	if got := query(t, in.State.Conn.URL, "select string_agg(v, ',') from t"); got != "golden" {
		t.Errorf("clone holds %q, want the seed's row", got)
	}
	if got := query(t, in.State.Conn.URL, "show work_mem"); got != "7MB" {
		t.Errorf("clone runs work_mem = %s, want the recipe's 7MB", got)
	}
	if in.State.Recipe != r.Path || in.State.Key != b.Golden.Key {
		t.Errorf("clone records recipe %q and key %s, want %q and %s", in.State.Recipe, in.State.Key, r.Path, b.Golden.Key)
	}

	// The daemon keeps one project: an edited seed is picked up.
	if err := os.WriteFile(filepath.Join(proj, "seed.sql"), []byte("create table t(v text); insert into t values ('edited');\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	edited, err := p.Golden(ctx, r)
	if err != nil || !edited.Built || edited.Golden.Key == b.Golden.Key {
		t.Fatalf("Golden after an edit: %v, built %v, same key %v", err, edited.Built, edited.Golden.Key == b.Golden.Key)
	}
}

// A pulled golden runs only on its exact server version.
func TestCheckEngine(t *testing.T) {
	ctx := context.Background()
	open := project.Opener(engines.Open)
	eng, err := open(ctx, engine.Want{Engine: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	have, err := eng.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := project.CheckEngine(ctx, open, "postgres", have); err != nil || got == nil {
		t.Fatalf("same version refused: %v", err)
	}
	if _, err := project.CheckEngine(ctx, open, "postgres", have+" (another build)"); !errors.Is(err, errs.ErrConflict) {
		t.Errorf("another build of the version: %v, want a conflict", err)
	}
	if _, err := project.CheckEngine(ctx, open, "postgres", "postgres (PostgreSQL) 9.1.2"); !errors.Is(err, errs.ErrUnsupported) {
		t.Errorf("a version this machine lacks: %v, want unsupported", err)
	}
}

func TestMajorVersion(t *testing.T) {
	if got := project.MajorVersion("postgres", "15.18"); got != "15" {
		t.Errorf("postgres major of 15.18: %q", got)
	}
	if got := project.MajorVersion("mariadb", "10.11.19"); got != "10.11" {
		t.Errorf("mariadb major of 10.11.19: %q", got)
	}
}

// The engine cache defaults to the store's, and the Maven and pip
// clients are the ones on PATH.
func TestFetchOptions(t *testing.T) {
	s, root := newStore(t)
	o := project.FetchOptions(s, project.EngineCache{})
	if o.Dir != s.EnginesDir() || o.Offline {
		t.Errorf("default cache %s offline %v, want %s online", o.Dir, o.Offline, s.EnginesDir())
	}
	mvn, _ := exec.LookPath("mvn")
	pip, _ := exec.LookPath("pip3")
	if pip == "" {
		pip, _ = exec.LookPath("pip")
	}
	if o.Maven.Mvn != mvn || o.Pip != pip {
		t.Errorf("mvn %q pip %q, want %q %q", o.Maven.Mvn, o.Pip, mvn, pip)
	}
	o = project.FetchOptions(s, project.EngineCache{Dir: root, Offline: true, MavenRepo: "https://repo.example/maven2", MavenPlainHTTP: true})
	if o.Dir != root || !o.Offline || o.Maven.RepoURL != "https://repo.example/maven2" || !o.Maven.PlainHTTP {
		t.Errorf("given cache not used: %+v", o)
	}
}
