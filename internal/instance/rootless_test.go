package instance_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Rootless clones (OverlayFS in the server's own namespaces) seen from
// dbfork's side: prewarm and hot copy-up go through the server's
// namespace, inspect reads the upper dir, down and gc work, and a server
// killed with SIGKILL leaves no mount in any namespace and no process.
func TestRootlessInstances(t *testing.T) {
	if os.Geteuid() != 0 {
		rootlessAsUser(t, testenv.UserDirs(t))
		return
	}
	dirs := map[string]string{"host": testenv.UserDir(t)}
	xfs := testenv.LoopFS(t, "xfs", 700<<20)
	testenv.ChownToUser(t, xfs)
	dirs["xfs"] = xfs
	arg, _ := json.Marshal(dirs)
	testenv.RunAsUser(t, "^TestRootlessInstances$", string(arg))
	for _, d := range dirs {
		testenv.AssertNoMountsAnywhere(t, d)
		testenv.AssertClean(t, d)
	}
}

func rootlessAsUser(t *testing.T, dirs map[string]string) {
	ctx := context.Background()
	for _, fs := range []string{"host", "xfs"} {
		t.Run(fs, func(t *testing.T) {
			root := dirs[fs]
			if root == "" {
				t.Skipf("making a %s loop filesystem needs root; CI runs this test as root, which makes it and re-runs it as a user", fs)
			}
			s, pg, g := buildShop(t, root)
			in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "userns-overlay"})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Destroy(ctx, s)
			if entries, _ := os.ReadDir(in.State.DataDir); len(entries) != 0 {
				t.Fatalf("the clone is mounted in dbfork's own namespace: %d entries", len(entries))
			}
			files, err := pg.TableFiles(ctx, in.State.Server, []string{"items"})
			if err != nil || len(files) == 0 {
				t.Fatalf("table files through the namespace: %v %v", files, err)
			}
			pw, err := instance.Prewarm(ctx, in.State, files, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pw.Files < 100 || pw.Bytes < g.Manifest.TotalBytes/2 || pw.CopiedUp != (fs == "xfs") {
				t.Fatalf("prewarm through the namespace: %+v of a %d byte golden", pw, g.Manifest.TotalBytes)
			}
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(in.State.Scratch, "upper", f)); err != nil {
					t.Errorf("hot file %s not copied up: %v", f, err)
				}
			}
			c := connect(t, in.State.Conn.URL)
			if _, err := c.Exec(ctx, "insert into items(name) values ('rootless')"); err != nil {
				t.Fatal(err)
			}
			if n := count(t, c); n != 2002 {
				t.Fatalf("%d rows", n)
			}
			c.Close(ctx)
			u, err := instance.Inspect(in.State, g.DataDir())
			if err != nil || len(u.Files) == 0 {
				t.Fatalf("inspect: %v %+v", err, u)
			}
			// Reset: same DSN, the golden's rows, no mount left behind.
			if err := in.Reset(ctx, s, pg, g, nil); err != nil {
				t.Fatal(err)
			}
			c = connect(t, in.State.Conn.URL)
			if n := count(t, c); n != 2001 {
				t.Fatalf("%d rows after reset, want the golden's 2001", n)
			}
			c.Close(ctx)
			if m := testenv.MountsInAnyNamespace(in.State.Dir); len(m) != 1 {
				t.Fatalf("after reset, want one mount (the new server's), got %v", m)
			}
			u, err = instance.Inspect(in.State, g.DataDir())
			if err != nil || len(u.Files) == 0 {
				t.Fatalf("inspect: %v %+v", err, u)
			}
			if err := instance.Down(ctx, s, in.State.ID); err == nil {
				t.Fatal("down of an instance this process holds succeeded")
			}
			if err := in.Destroy(ctx, s); err != nil {
				t.Fatal(err)
			}
			testenv.AssertNoMountsAnywhere(t, root)
		})
	}
	t.Run("server killed", func(t *testing.T) {
		root := dirs["host"]
		s, pg, g := buildShop(t, filepath.Join(root, "killed"))
		in, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "userns-overlay", Detached: true})
		if err != nil {
			t.Fatal(err)
		}
		in.Release()
		if got := testenv.MountsInAnyNamespace(in.State.Dir); len(got) != 1 {
			t.Fatalf("want the clone mounted in exactly one namespace, got %v", got)
		}
		if err := syscall.Kill(in.State.Server.Process.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for len(testenv.ServersUnder(in.State.Dir)) > 0 || len(testenv.MountsInAnyNamespace(in.State.Dir)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("after SIGKILL: processes %v, mounts %v", testenv.ServersUnder(in.State.Dir), testenv.MountsInAnyNamespace(in.State.Dir))
			}
			time.Sleep(20 * time.Millisecond)
		}
		reaped := instance.GC(ctx, s, false)
		if len(reaped) != 1 || reaped[0].ID != in.State.ID || reaped[0].Error != "" || !strings.Contains(reaped[0].Reason, "no longer running") {
			t.Fatalf("gc after the kill: %+v", reaped)
		}
		if _, err := os.Stat(in.State.Dir); !os.IsNotExist(err) {
			t.Fatalf("instance dir left: %v", err)
		}
		// A live detached instance: down stops it and its namespace.
		in2, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: "userns-overlay", Detached: true})
		if err != nil {
			t.Fatal(err)
		}
		in2.Release()
		// As after a crash between starting the server and recording it:
		// the record names no server, and the server's own pid file is
		// inside the clone, which only its namespace sees.
		forgetServer(t, in2.State.Dir)
		if err := instance.Down(ctx, s, in2.State.ID); err != nil {
			t.Fatal(err)
		}
		if pids := testenv.ServersUnder(root); len(pids) > 0 {
			t.Fatalf("down left the unrecorded server running: %v", pids)
		}
		testenv.AssertNoMountsAnywhere(t, root)
		testenv.AssertClean(t, root)
	})
}

func forgetServer(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	delete(st, "server")
	data, _ = json.Marshal(st)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
