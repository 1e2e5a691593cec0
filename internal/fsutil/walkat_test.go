package fsutil

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// WalkAt shows every entry once, parents first; ChmodAt changes a file
// and refuses a symlink without touching what it points to, by either
// route (fchmodat2, or the O_PATH fallback older kernels take).
func TestWalkAtAndChmodAt(t *testing.T) {
	root := t.TempDir()
	outside := filepath.Join(t.TempDir(), "victim")
	for _, p := range []string{"a/b/f", "c"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "a", "link")); err != nil {
		t.Fatal(err)
	}
	dfd, err := OpenDirNoFollow(root)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	var seen []string
	err = WalkAt(dfd, func(dir int, name, rel string, st *unix.Stat_t) error {
		seen = append(seen, rel)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			for _, chmod := range []func(int, string, uint32) error{ChmodAt, chmodAtPath} {
				if err := chmod(dir, name, 0o777); !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.EOPNOTSUPP) {
					t.Errorf("chmod of symlink %s: %v", rel, err)
				}
			}
		case unix.S_IFREG:
			if err := ChmodAt(dir, name, 0o640); err != nil {
				return err
			}
			return chmodAtPath(dir, name, 0o644)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(seen, " "); got != "a a/b a/b/f a/link c" {
		t.Fatalf("walked %q", got)
	}
	for _, p := range []string{"a/b/f", "c"} {
		if fi, _ := os.Stat(filepath.Join(root, p)); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v", p, fi.Mode())
		}
	}
	if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o600 {
		t.Fatalf("a symlink's target was changed: %v", fi.Mode())
	}
}
