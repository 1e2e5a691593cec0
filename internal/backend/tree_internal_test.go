package backend

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
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
	}, true)
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

// A clone gets a golden file's extended attributes but not the build's
// stamp marks (fsutil.StampedXattr: bookkeeping for the next build's
// seal); a copy of a golden keeps both.
func TestCopyTreeLeavesStampsOutOfClones(t *testing.T) {
	src := filepath.Join(t.TempDir(), "g")
	if err := os.MkdirAll(filepath.Join(src, "base"), 0o700); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(src, "base", "16384")
	if err := os.WriteFile(f, []byte("rows"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(f, fsutil.StampedXattr, []byte("4:1.0"), 0); err != nil {
		t.Skipf("no user xattrs on %s: %v", src, err)
	}
	if err := unix.Lsetxattr(f, "user.dbfork", []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		clone     bool
		wantStamp bool
	}{{true, false}, {false, true}} {
		dst := filepath.Join(t.TempDir(), "c")
		if err := copyTree(src, dst, byteCopy, c.clone); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		g := filepath.Join(dst, "base", "16384")
		if n, err := unix.Lgetxattr(g, "user.dbfork", buf); err != nil || string(buf[:n]) != "kept" {
			t.Errorf("clone=%v: user.dbfork %q %v, want kept", c.clone, buf[:max(n, 0)], err)
		}
		_, err := unix.Lgetxattr(g, fsutil.StampedXattr, buf)
		if got := err == nil; got != c.wantStamp {
			t.Errorf("clone=%v: stamp mark present %v (%v), want %v", c.clone, got, err, c.wantStamp)
		}
		var m Marks
		r, err := restoreTree(context.Background(), src, dst, &m, byteCopy)
		if err != nil || r.Files != 1 {
			t.Fatalf("clone=%v: restore %+v %v, want the one file redone (no marks)", c.clone, r, err)
		}
		_, err = unix.Lgetxattr(g, fsutil.StampedXattr, buf)
		if err == nil {
			t.Errorf("clone=%v: a restored file got the stamp mark", c.clone)
		}
	}
}

// A clone's files get the golden's permission bits and never a set-id
// bit, whether the umask lets the create give them at once or a chmod
// has to follow.
func TestCopyTreeModes(t *testing.T) {
	src := filepath.Join(t.TempDir(), "g")
	if err := os.MkdirAll(src, 0o700); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{"a": 0o600, "b": 0o640, "c": 0o444, "d": 0o755}
	modes := map[string]uint32{"a": 0o600, "b": 0o640, "c": 0o444, "d": 0o4755}
	for n, m := range modes {
		p := filepath.Join(src, n)
		if err := os.WriteFile(p, []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, mask := range []int{0o022, 0o077} {
		old := unix.Umask(mask)
		dst := filepath.Join(t.TempDir(), "c")
		err := copyTree(src, dst, byteCopy, true)
		unix.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		for n, m := range want {
			fi, err := os.Lstat(filepath.Join(dst, n))
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != m {
				t.Errorf("umask %03o: %s has mode %v, want %v", mask, n, got, m)
			}
		}
	}
}
