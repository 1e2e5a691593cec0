package instance_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// On every filesystem CI can make, every backend that works there clones
// a real golden into independent, working PostgreSQL instances.
func TestInstancesOnEveryBackend(t *testing.T) {
	testenv.RequireRoot(t)
	matrix := []struct {
		fs, auto string
		backends []string
	}{
		{"host", "overlay", []string{"overlay", "copy"}},
		{"xfs", "overlay", []string{"reflink", "overlay"}},
		{"btrfs", "btrfs", []string{"btrfs", "reflink"}},
	}
	for _, m := range matrix {
		t.Run(m.fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if m.fs != "host" {
				root = testenv.LoopFS(t, m.fs, 700<<20)
			}
			s, pg, g := buildShop(t, root)
			for _, b := range append([]string{"auto"}, m.backends...) {
				t.Run(b, func(t *testing.T) {
					checkInstances(t, s, pg, g, b, map[string]string{"auto": m.auto}[b])
				})
			}
			testenv.AssertClean(t, root)
		})
	}
}

func buildShop(t *testing.T, root string) (*store.Store, *postgres.Postgres, *golden.Golden) {
	t.Helper()
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	pg, err := postgres.New(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	r, err := recipe.Load(testenv.ShopRecipe(t, filepath.Join(root, "proj"), 2000))
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(context.Background(), s, pg, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s, pg, res.Golden
}

func checkInstances(t *testing.T, s *store.Store, pg *postgres.Postgres, g *golden.Golden, backend, wantAuto string) {
	ctx := context.Background()
	a, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(ctx, s)
	b, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(ctx, s)
	if wantAuto != "" && a.State.Backend != wantAuto {
		t.Fatalf("auto chose %s, want %s", a.State.Backend, wantAuto)
	}
	if fs, _ := fsutil.FSType(a.State.Dir); fs == "xfs" {
		// Clones get a copy-on-write extent size hint of one page, down
		// to the files: a page write must not reserve 128 KiB.
		probe := filepath.Join(a.State.DataDir, "PG_VERSION")
		if a.State.Backend == "overlay" {
			probe = filepath.Join(a.State.Scratch, "upper")
		}
		if got := fsutil.CowExtSize(probe); got != 8192 {
			t.Fatalf("cowextsize of %s is %d, want 8192", probe, got)
		}
	}
	if a.State.BackendWhy == "" || a.State.Status != instance.StatusReady || a.State.ReadyMs <= 0 {
		t.Fatalf("state incomplete: %+v", a.State)
	}
	ca := connect(t, a.State.Conn.URL)
	cb := connect(t, b.State.Conn.URL)
	if n := count(t, ca); n != 2001 {
		t.Fatalf("clone has %d rows, want the golden's 2001", n)
	}
	if _, err := ca.Exec(ctx, "insert into items(name) select 'more' from generate_series(1,100)"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, cb); n != 2001 {
		t.Fatalf("a write to one instance showed up in another: %d rows", n)
	}
	// TCP needs the instance's own password.
	bad := strings.Replace(a.State.Conn.URL, a.State.Server.Password, "wrong", 1)
	if c, err := pgx.Connect(ctx, bad); err == nil {
		c.Close(ctx)
		t.Fatal("a wrong password was accepted over TCP")
	}
	if a.State.Server.Password == b.State.Server.Password {
		t.Fatal("two instances share a password")
	}
	if fi, err := os.Stat(filepath.Join(a.State.Dir, "state.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file (holds the password) is not 0600: %v", err)
	}
	ca.Close(ctx)
	cb.Close(ctx)
	dir := a.State.Dir
	if err := a.Destroy(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("instance dir left behind: %v", err)
	}
	if m, _ := fsutil.MountsUnder(dir); len(m) > 0 {
		t.Fatalf("mount left: %v", m)
	}
	if a.State.Server.Process.Alive() {
		t.Fatal("server still running after Destroy")
	}
}

func connect(t *testing.T, url string) *pgx.Conn {
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func count(t *testing.T, c *pgx.Conn) int {
	var n int
	if err := c.QueryRow(context.Background(), "select count(*) from items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStartFailureReportsLogTailAndCleansUp(t *testing.T) {
	root := testenv.Dir(t)
	s, pg, g := buildShop(t, root)
	_, err := instance.Create(context.Background(), s, pg, g, instance.Options{
		Backend: "copy", Settings: map[string]string{"shared_buffers": "lots"},
	})
	if err == nil {
		t.Fatal("a server with a bad setting started")
	}
	if !strings.Contains(err.Error(), `invalid value for parameter "shared_buffers"`) || !strings.Contains(err.Error(), "server log") {
		t.Fatalf("error lacks the server log tail: %v", err)
	}
	entries, _ := os.ReadDir(s.InstancesDir())
	if len(entries) > 0 {
		t.Fatalf("failed start left %d entries in instances/", len(entries))
	}
	testenv.AssertClean(t, root)
}

func TestDownRefusesHeldInstanceAndGCKeepsIt(t *testing.T) {
	root := testenv.Dir(t)
	s, pg, g := buildShop(t, root)
	ctx := context.Background()
	in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if err := instance.Down(ctx, s, in.State.ID); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("down of a held instance: %v", err)
	}
	if r := instance.GC(ctx, s, true); len(r) != 0 {
		t.Fatalf("gc touched a held instance: %+v", r)
	}
	in.Release() // now it is like a `run` whose process died
	r := instance.GC(ctx, s, false)
	if len(r) != 1 || r[0].Error != "" {
		t.Fatalf("gc of an orphan: %+v", r)
	}
	testenv.AssertClean(t, root)
}

func TestDetachedInstanceSurvivesGCUntilDown(t *testing.T) {
	root := testenv.Dir(t)
	s, pg, g := buildShop(t, root)
	ctx := context.Background()
	in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "auto", Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	in.Release()
	if r := instance.GC(ctx, s, false); len(r) != 0 {
		t.Fatalf("gc removed a live detached instance: %+v", r)
	}
	id, err := instance.Resolve(s, in.State.ID[:4])
	if err != nil || id != in.State.ID {
		t.Fatalf("resolve by prefix: %v", err)
	}
	if err := instance.Down(ctx, s, id); err != nil {
		t.Fatal(err)
	}
	if _, err := instance.Load(s, id); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("instance still there after down: %v", err)
	}
	testenv.AssertClean(t, root)
}
