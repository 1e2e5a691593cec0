package instance_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Goldens published before per-instance uids hold files only the server
// user may use (0600/0700, no group_shared in the manifest). The first
// clone shares them with the servers' group, manifest included, and
// clones of them work on every backend; btrfs's read-only golden too.
func TestOldGoldensAreShared(t *testing.T) {
	testenv.RequireRoot(t)
	for _, m := range []struct{ fs, backends string }{{"host", "overlay"}, {"btrfs", "btrfs"}} {
		t.Run(m.fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if m.fs != "host" {
				root = testenv.LoopFS(t, m.fs, 700<<20)
			}
			s, pg, g := buildShop(t, root)
			if !g.Manifest.GroupShared {
				t.Fatal("a golden built as root is not shared with the servers' group")
			}
			makeOld(t, g)
			old, err := golden.Lookup(s, g.Key)
			if err != nil {
				t.Fatal(err)
			}
			if err := golden.CheckClonable(old); err != nil {
				t.Fatalf("the old golden is not consistent to start with: %v", err)
			}
			ctx := context.Background()
			in, err := instance.Create(ctx, s, pg, old, instance.Options{Backend: m.backends})
			if err != nil {
				t.Fatal(err)
			}
			c := connect(t, in.State.Conn.URL)
			if n := count(t, c); n != 2001 {
				t.Fatalf("clone of a migrated golden has %d rows", n)
			}
			c.Close(ctx)
			if err := in.Destroy(ctx, s); err != nil {
				t.Fatal(err)
			}
			now, err := golden.Lookup(s, g.Key)
			if err != nil {
				t.Fatal(err)
			}
			if !now.Manifest.GroupShared {
				t.Fatal("manifest not migrated")
			}
			if probs, err := golden.Verify(now, true); err != nil || len(probs) > 0 {
				t.Fatalf("migrated golden does not verify: %v %v", probs, err)
			}
			if fi, err := os.Stat(filepath.Join(now.DataDir(), "PG_VERSION")); err != nil || fi.Mode().Perm() != 0o660 {
				t.Fatalf("golden file mode after migration: %v %v", fi.Mode(), err)
			}
			testenv.AssertClean(t, root)
		})
	}
}

// makeOld turns g back into what dbfork published before: the group's
// rights taken away, on disk and in the manifest.
func makeOld(t *testing.T, g *golden.Golden) {
	t.Helper()
	thawed, err := backend.ThawDataDir(g.DataDir())
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(g.DataDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()&^0o070)
	})
	if err != nil {
		t.Fatal(err)
	}
	if thawed {
		if err := backend.FreezeDataDir(g.DataDir()); err != nil {
			t.Fatal(err)
		}
	}
	m := *g.Manifest
	m.GroupShared = false
	all, err := g.Manifest.Files()
	if err != nil {
		t.Fatal(err)
	}
	files := append([]golden.File(nil), all...)
	for i := range files {
		files[i].Mode &^= 0o070
	}
	m.SetFiles(files)
	data, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, golden.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
}
