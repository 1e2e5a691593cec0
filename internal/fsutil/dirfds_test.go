package fsutil_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// DirFDs stats files relative to their open directories, reports what
// os.Lstat reports, and refuses a directory on the way that is a symlink
// (a stat by full path would have followed it).
func TestDirFDs(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "lib", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "lib/b", "lib/sub/c"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte(p), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "lib/b"), 0o4750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("lib", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	d, err := fsutil.OpenDirs(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, rel := range []string{"a", "lib", "lib/b", "lib/sub", "lib/sub/c", "link"} {
		var st unix.Stat_t
		if err := d.Lstat(rel, &st); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := fsutil.FileMode(st.Mode); got != fi.Mode() || st.Size != fi.Size() {
			t.Fatalf("%s: mode %v size %d, os.Lstat says %v %d", rel, got, st.Size, fi.Mode(), fi.Size())
		}
	}
	var st unix.Stat_t
	if err := d.Lstat("link/b", &st); !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("a file below a symlinked dir: %v, want it refused", err)
	}
	if err := d.Lstat("lib/missing", &st); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
	for _, rel := range []string{".", "..", "../a", "/etc/passwd", "lib/../a"} {
		if err := d.Lstat(rel, &st); err == nil || !strings.Contains(err.Error(), "not a path inside") {
			t.Fatalf("Lstat(%q): %v, want it refused", rel, err)
		}
	}
}
