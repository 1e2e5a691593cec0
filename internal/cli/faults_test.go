package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A build that fills the store's filesystem fails with the server's own
// reason and leaves the store as it was: no golden, no build dir, the
// space given back.
func TestBuildOnFullDisk(t *testing.T) {
	e := newEnv(t)
	mnt := e.useLoopStore("xfs", 300<<20)
	big := testenv.WriteRecipe(t, filepath.Join(e.root, "big"), "engine = \"postgres\"\n[[load]]\nsql = [\"big.sql\"]\n",
		map[string]string{"big.sql": "create table t(a text);\ninsert into t select repeat('x', 1000) from generate_series(1, 400000);\n"})
	var before syscall.Statfs_t
	_ = syscall.Statfs(mnt, &before)
	r := e.run("build", "-f", big)
	if r.code == 0 || !strings.Contains(r.stderr, "No space left on device") || !strings.Contains(r.stderr, "big.sql:2") {
		t.Fatalf("build on a full disk: exit %d %q", r.code, r.stderr)
	}
	if left := testenv.TmpBuilds(e.store); len(left) > 0 {
		t.Errorf("build dirs left: %v", left)
	}
	if g := e.ls().Goldens; len(g) != 0 {
		t.Errorf("goldens after a failed build: %+v", g)
	}
	// XFS frees the blocks of deleted files in the background: flush
	// that (syncfs) and give it a few seconds before calling them kept.
	var lost int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if f, err := os.Open(mnt); err == nil {
			_ = unix.Syncfs(int(f.Fd()))
			f.Close()
		}
		var after syscall.Statfs_t
		_ = syscall.Statfs(mnt, &after)
		lost = int64(before.Bfree-after.Bfree) * before.Bsize
		if lost <= 20<<20 || time.Now().After(deadline) {
			break
		}
	}
	if lost > 20<<20 {
		t.Errorf("the failed build kept %d MiB", lost>>20)
	}
	// The smaller recipe still builds and runs there.
	if r := e.run("run", "--", "psql", "-XAtc", "select count(*) from items"); r.code != 0 || strings.TrimSpace(r.stdout) != "3001" {
		t.Fatalf("run after a failed build: %d %q %q", r.code, r.stdout, r.stderr)
	}
	e.assertNothingLeft()
}

// A server that cannot start: the error carries its log, nothing is left.
func TestServerFailsAtStart(t *testing.T) {
	e := newEnv(t)
	bad := testenv.WriteRecipe(t, filepath.Join(e.root, "bad"), "engine = \"postgres\"\n[settings]\nshared_buffers = \"-5\"\n", map[string]string{})
	r := e.run("up", "-f", bad)
	if r.code == 0 || !strings.Contains(r.stderr, "shared_buffers") || !strings.HasPrefix(r.stderr, "dbfork: ") {
		t.Fatalf("up with a server that cannot start: %d %q", r.code, r.stderr)
	}
	e.assertNothingLeft()
}

// A server killed while its instance is leased or up: ls says dead, the
// lease can still be released, the pool hands out a live one next, and
// gc removes what is left.
func TestServerKilledWhileLeased(t *testing.T) {
	e := newEnv(t)
	srv, _, c := e.startServe("-f", "dbfork.toml")
	recipePath := filepath.Join(e.proj, "dbfork.toml")
	l, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: recipePath})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := store.Open(e.store)
	st, err := instance.Load(s, l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Server.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = st.Server.Process.Wait(context.Background())
	if err := c.Release(context.Background(), l.ID); err != nil {
		t.Fatalf("release of a lease whose server died: %v", err)
	}
	// Kill a ready one in the pool too: acquire must skip it.
	waitFor(t, func() bool { ps, _ := c.Pools(context.Background()); return len(ps) == 1 && ps[0].Ready == 2 })
	ins, _ := instance.List(s)
	for _, in := range ins {
		if in.Server != nil {
			_ = in.Server.Process.Signal(syscall.SIGKILL)
			_ = in.Server.Process.Wait(context.Background())
			break
		}
	}
	for i := 0; i < 2; i++ {
		l, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: recipePath})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := instance.Load(s, l.ID)
		if !st.Alive() {
			t.Fatalf("pool handed out instance %s whose server is dead", l.ID)
		}
		_ = c.Release(context.Background(), l.ID)
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	_ = srv.Wait()

	// An `up` instance whose server is killed: ls says dead, gc removes it.
	var up struct{ ID string }
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil {
		t.Fatal(err)
	}
	st, _ = instance.Load(s, up.ID)
	_ = st.Server.Process.Signal(syscall.SIGKILL)
	_ = st.Server.Process.Wait(context.Background())
	if ls := e.ls(); len(ls.Instances) != 1 || ls.Instances[0].Status != "dead" {
		t.Fatalf("ls after the server died: %+v", ls.Instances)
	}
	e.mustRun("gc")
	e.assertNothingLeft()
	_ = os.Remove(filepath.Join(e.store, api.SocketName))
}

// A pool whose max does not fit in the store is refused at the first
// acquire, by a real daemon, saying what fits; nothing is created.
func TestPoolRefusesWhatDoesNotFit(t *testing.T) {
	e := newEnv(t)
	e.useLoopStore("xfs", 300<<20)
	rec := testenv.ShopRecipe(t, filepath.Join(e.root, "wide"), 100)
	f, err := os.OpenFile(rec, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("\n[pool]\nmin = 0\nmax = 64\n")
	f.Close()
	srv, _, _ := e.startServe()
	r := e.run("run", "-f", rec, "--", "true")
	if r.code != 2 || !strings.Contains(r.stderr, "pool max 64 needs about") || !strings.Contains(r.stderr, "fits") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("a pool too big for the store: exit %d %q", r.code, r.stderr)
	}
	if ins := e.ls().Instances; len(ins) != 0 {
		t.Fatalf("a refused pool made instances: %+v", ins)
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	_ = srv.Wait()
	e.assertNothingLeft()
}

// useLoopStore moves the env's store onto a fresh loop filesystem. Its
// cleanup (run before the filesystem is unmounted) gc's that store and
// points the env back, so the env's own final gc does not recreate a
// store in the bare mount point.
func (e *env) useLoopStore(fstype string, size int64) string {
	mnt := testenv.LoopFS(e.t, fstype, size)
	orig := e.store
	e.store = filepath.Join(mnt, "store")
	e.t.Cleanup(func() {
		e.run("gc", "--all")
		e.store = orig
	})
	return mnt
}
