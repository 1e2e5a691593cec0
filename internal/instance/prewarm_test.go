package instance_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Prewarm reads the whole clone; on an overlay whose upper dir can reflink
// (XFS) it copies every file up first, cheaply; on ext4 it copies nothing
// up. The instance keeps working and stays isolated either way.
func TestPrewarm(t *testing.T) {
	testenv.RequireRoot(t)
	for _, fs := range []string{"host", "xfs"} {
		t.Run(fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if fs != "host" {
				root = testenv.LoopFS(t, fs, 700<<20)
			}
			_, _, g, in := overlayInstance(t, root)
			ctx := context.Background()
			pw, err := instance.Prewarm(ctx, in.State, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pw.Files < 100 || pw.Bytes < g.Manifest.TotalBytes/2 {
				t.Errorf("prewarm read %d files, %d bytes of a %d byte golden", pw.Files, pw.Bytes, g.Manifest.TotalBytes)
			}
			upper := filepath.Join(in.State.Scratch, "upper")
			copied := 0
			_ = filepath.Walk(upper, func(p string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					copied++
				}
				return nil
			})
			owned, _ := fsutil.PrivateBytes(in.State.Scratch)
			if pw.CopiedUp != (fs == "xfs") {
				t.Errorf("copied up: %v on %s", pw.CopiedUp, fs)
			}
			if fs == "xfs" && copied < pw.Files*9/10 {
				t.Errorf("xfs: %d of %d files copied up", copied, pw.Files)
			}
			if fs == "host" && copied > pw.Files/2 {
				t.Errorf("ext4: prewarm copied %d of %d files up", copied, pw.Files)
			}
			// Copy-up by reflink owns (almost) nothing of its own.
			if owned > g.Manifest.TotalBytes/4 {
				t.Errorf("%s: the prewarmed clone owns %d bytes of a %d byte golden", fs, owned, g.Manifest.TotalBytes)
			}
			c := connect(t, in.State.Conn.URL)
			if _, err := c.Exec(ctx, "insert into items(name) values ('after prewarm')"); err != nil {
				t.Fatal(err)
			}
			if n := count(t, c); n != 2002 {
				t.Errorf("%d rows after prewarm and an insert", n)
			}
		})
	}
}

// A client waiting for the pool cuts prewarming short: nothing more is
// read, but the hot files are still copied up.
func TestPrewarmCutShortForWaitingClient(t *testing.T) {
	testenv.RequireRoot(t)
	_, pg, _, in := overlayInstance(t, testenv.Dir(t))
	ctx := context.Background()
	files, err := pg.TableFiles(ctx, in.State.Server, []string{"items"})
	if err != nil || len(files) == 0 {
		t.Fatalf("table files of items: %v %v", files, err)
	}
	pw, err := instance.Prewarm(ctx, in.State, files, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if !pw.Cut || pw.Bytes != 0 || pw.Files != len(files) {
		t.Fatalf("cut short: %+v, want only the %d hot files opened and nothing read", pw, len(files))
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(in.State.Scratch, "upper", f)); err != nil {
			t.Errorf("hot file %s not copied up: %v", f, err)
		}
	}
}

// overlayInstance builds the shop golden below root and clones it with
// OverlayFS; the instance goes when the test ends.
func overlayInstance(t *testing.T, root string) (*store.Store, *postgres.Postgres, *golden.Golden, *instance.Instance) {
	t.Helper()
	s, pg, g := buildShop(t, root)
	in, err := instance.Create(context.Background(), s, pg, g, instance.Options{Backend: "overlay"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Destroy(context.Background(), s) })
	return s, pg, g, in
}

// Issue 12 M6: prewarm runs as root over files the server user owns (and a
// test's SQL can run programs as it): a planted fifo, or a symlink to one
// outside the clone, must neither block nor be followed.
func TestPrewarmIgnoresPlantedFiles(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.Dir(t)
	_, _, _, in := overlayInstance(t, root)
	outside := filepath.Join(root, "outside-fifo")
	for _, p := range []string{outside, filepath.Join(in.State.DataDir, "planted-fifo")} {
		if err := syscall.Mkfifo(p, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(in.State.DataDir, "planted-link")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := instance.Prewarm(context.Background(), in.State, []string{"planted-link", "planted-fifo"}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("prewarm blocked on a planted fifo")
	}
}
