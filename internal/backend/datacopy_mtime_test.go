package backend_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/testenv"
)

// The copy of an intermediate golden keeps each file's mtime and xattrs
// (by reflink on XFS, by bytes elsewhere): PostgreSQL's seal then knows the
// seed's files were not written since they were stamped.
func TestCopyDataDirKeepsMtimes(t *testing.T) {
	for _, c := range []struct{ name, dir, how string }{
		{"xfs", testenv.LoopFS(t, "xfs", 300<<20), "reflink"},
		{"tmp", t.TempDir(), ""},
	} {
		src := filepath.Join(c.dir, "src")
		if err := os.MkdirAll(filepath.Join(src, "base"), 0o700); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(src, "base", "16384")
		if err := os.WriteFile(f, make([]byte, 3<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		old := time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC)
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lsetxattr(f, "user.dbfork.stamped", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(c.dir, "dst")
		how, err := backend.CopyDataDir(src, dst)
		if err != nil || (c.how != "" && how != c.how) {
			t.Fatalf("%s: CopyDataDir = %q, %v", c.name, how, err)
		}
		fi, err := os.Stat(filepath.Join(dst, "base", "16384"))
		if err != nil || !fi.ModTime().Equal(old) {
			t.Fatalf("%s: copy's mtime %v (%v), want %v", c.name, fi.ModTime(), err, old)
		}
		buf := make([]byte, 8)
		if n, err := unix.Lgetxattr(filepath.Join(dst, "base", "16384"), "user.dbfork.stamped", buf); err != nil || string(buf[:n]) != "x" {
			t.Fatalf("%s: copy's xattr %q %v", c.name, buf[:n], err)
		}
	}
}
