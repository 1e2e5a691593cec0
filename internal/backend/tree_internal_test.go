package backend

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

// Issue 12 H2: while root copies files into a new clone, no dir on the way
// belongs to the server user yet, so its processes (any test's SQL can run
// programs as it) cannot swap an entry for a symlink under root's feet; the
// tree is handed over bottom-up once it is complete.
func TestCopyTreeHandsOverLast(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away (CI runs as root)")
	}
	root := t.TempDir()
	src, dst := filepath.Join(root, "g"), filepath.Join(root, "c")
	for _, d := range []string{"a/b/c", "d"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/x", "a/b/y", "a/b/c/z", "d/w"} {
		if err := os.WriteFile(filepath.Join(src, f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_ = filepath.Walk(src, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 65534, 65534) })
	var checked atomic.Int32
	err := copyTree(src, dst, func(in, out *os.File) error {
		for d := filepath.Dir(out.Name()); strings.HasPrefix(d, dst); d = filepath.Dir(d) {
			var st syscall.Stat_t
			if err := syscall.Lstat(d, &st); err != nil {
				return err
			}
			if st.Uid != 0 || st.Mode&0o077 != 0 {
				t.Errorf("copying %s while %s is owned by %d with mode %o", out.Name(), d, st.Uid, st.Mode&0o777)
			}
		}
		checked.Add(1)
		return byteCopy(in, out)
	})
	if err != nil || checked.Load() != 4 {
		t.Fatalf("copyTree: %v (%d files)", err, checked.Load())
	}
	_ = filepath.Walk(dst, func(p string, fi os.FileInfo, _ error) error {
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || fi.Mode().Perm() != 0o700 && fi.IsDir() {
			t.Errorf("%s: owner %d mode %v after the copy", p, st.Uid, fi.Mode())
		}
		return nil
	})
}
