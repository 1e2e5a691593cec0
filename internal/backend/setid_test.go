package backend_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 29 (audit H1): a set-id bit in a golden — one published before
// goldens were cleaned, or put there by hand — never comes back in a
// clone, whether the clone is made (copy, reflink) or restored in place.
// Root chowns each entry, which clears the bits; the clone must not set
// them again.
func TestClonesNeverGetSetIDBits(t *testing.T) {
	testenv.RequireRoot(t)
	for _, c := range []struct{ backend, fs string }{{"copy", "host"}, {"reflink", "xfs"}} {
		t.Run(c.backend, func(t *testing.T) {
			root := testenv.Dir(t)
			if c.fs != "host" {
				root = testenv.LoopFS(t, c.fs, 512<<20)
			}
			b, err := backend.Get(c.backend)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			golden := filepath.Join(root, "golden")
			write(t, filepath.Join(golden, "evil"), "#!/bin/true\n")
			write(t, filepath.Join(golden, "gdir", "f"), "x")
			for _, p := range []string{"evil", "gdir", "gdir/f"} {
				must(t, os.Lchown(filepath.Join(golden, p), 65534, 65534))
			}
			must(t, os.Chmod(filepath.Join(golden, "evil"), os.ModeSetuid|os.ModeSetgid|0o755))
			must(t, os.Chmod(filepath.Join(golden, "gdir"), os.ModeSetgid|0o755))
			clone := filepath.Join(root, "clone")
			if err := b.Prepare(ctx, golden, clone, filepath.Join(root, "scratch")); err != nil {
				t.Fatal(err)
			}
			noSetID(t, clone)

			// Reset in place: a file the server changed is made again from
			// the golden, with the golden's owner, but not its set-id bits.
			m, err := backend.MarkClone(clone)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(clone, "evil"), "changed")
			must(t, os.Chmod(filepath.Join(clone, "gdir"), 0o700))
			if _, err := b.(backend.Restorer).Restore(ctx, golden, clone, m); err != nil {
				t.Fatal(err)
			}
			noSetID(t, clone)
			if got, _ := os.ReadFile(filepath.Join(clone, "evil")); string(got) != "#!/bin/true\n" {
				t.Fatalf("restore did not bring the file back: %q", got)
			}
			must(t, b.Remove(ctx, clone, filepath.Join(root, "scratch")))
		})
	}
}

// noSetID fails if any entry below dir has a set-id bit, or if a file
// lost its owner (the bits must go, not the hand-over).
func noSetID(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: %v in a clone", p, fi.Mode())
		}
		if p != dir && fi.Sys().(*syscall.Stat_t).Uid != 65534 {
			t.Errorf("%s: owner %d, want the golden's 65534", p, fi.Sys().(*syscall.Stat_t).Uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
