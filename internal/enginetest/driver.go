package enginetest

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// testDriver is the driver-only tier: the engine through its two
// interfaces alone (Engine's lifecycle, Loader's steps), with no golden,
// clone or backend in between, so a failure here is the engine's. It needs
// no root: as root the server runs as the store's server user, otherwise
// as the user running the test (RunRootless runs it so).
func testDriver(t *testing.T, d Dialect, eng engine.Engine) {
	ld, ok := eng.(engine.Loader)
	if !ok {
		t.Fatalf("%s implements no engine.Loader", eng.Name())
	}
	ctx := context.Background()
	root := testenv.Dir(t)
	s := openStore(t, root)
	r := d.recipe(t, filepath.Join(root, "p"), 40)
	dir := filepath.Join(root, "driver")
	data, sock := driverDirs(t, s, dir)
	var srv *engine.Server
	t.Cleanup(func() {
		if srv != nil && !srv.Exited() {
			_ = engine.StopRecorded(context.Background(), srv, false)
		}
	})
	if err := eng.Init(ctx, engine.InitSpec{DataDir: data, Cluster: golden.ClusterOf(r), User: s.User, LogFile: filepath.Join(dir, "init.log")}); err != nil {
		t.Fatalf("init: %v", err)
	}
	spec := engine.StartSpec{DataDir: data, SocketDir: sock, LogFile: filepath.Join(dir, "server.log"), RunDir: dir,
		Listen: true, Profile: engine.ProfileSafe, User: s.User, Database: r.Database, Owner: r.Owner, Password: "driver-pw-1"}
	var err error
	if srv, err = eng.Start(ctx, spec); err != nil {
		t.Fatalf("start: %v", err)
	}
	b := golden.BuildOf(r)
	if err := ld.Setup(ctx, srv, b); err != nil {
		t.Fatalf("setup: %v", err)
	}
	for _, st := range r.Steps {
		if err := ld.Load(ctx, srv, b, golden.StepOf(st), io.Discard); err != nil {
			t.Fatalf("load %s: %v", st.Name, err)
		}
	}
	driverCount(t, d, eng, srv, 41)
	if err := ld.Finish(ctx, srv, b); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if err := eng.Stop(ctx, srv, true); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
	if cc, ok := eng.(engine.CleanChecker); ok {
		if err := cc.CheckCleanShutdown(ctx, data, spec.LogFile); err != nil {
			t.Fatalf("after a clean stop: %v", err)
		}
	}
	// Started again under the test profile with another password: the
	// loaded rows are there, reached over TCP with the new password.
	spec.Profile, spec.Password = engine.ProfileTest, "driver-pw-2"
	if srv, err = eng.Start(ctx, spec); err != nil {
		t.Fatalf("restart: %v", err)
	}
	driverCount(t, d, eng, srv, 41)
	if err := eng.Stop(ctx, srv, false); err != nil {
		t.Fatalf("stop: %v", err)
	}
	testenv.AssertClean(t, root)
}

// driverDirs makes dir with a data dir and a socket dir the server user
// owns.
func driverDirs(t *testing.T, s *store.Store, dir string) (data, sock string) {
	data, sock = filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{data, sock} {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := s.User.Chown(p); err != nil {
			t.Fatal(err)
		}
	}
	return data, sock
}

// driverCount checks items holds want rows, through the engine's own
// connection description.
func driverCount(t *testing.T, d Dialect, eng engine.Engine, srv *engine.Server, want int) {
	t.Helper()
	db, err := d.Open(eng.Conn(srv))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db); n != want {
		t.Fatalf("items has %d rows, want %d", n, want)
	}
}
