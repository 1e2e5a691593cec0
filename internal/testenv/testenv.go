// Package testenv gives tests real places to work: directories the
// unprivileged server user can reach, and XFS/btrfs loop filesystems.
package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// Dir returns a fresh directory under /tmp that every user can traverse
// (t.TempDir is 0700, which the dropped server user cannot enter). It is
// removed at the end of the test, after whatever is mounted below it.
func Dir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dbfork-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if os.Getenv("DBFORK_KEEP_FAILED") != "" && t.Failed() {
			t.Logf("kept %s", d)
			return
		}
		if err := fsutil.UnmountAllUnder(d); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := fsutil.RemoveAll(d); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return d
}

// RequireRoot skips a test that needs root (mounts, loop devices). CI runs
// as root, so these tests always run there.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (mount, loop devices); CI runs these as root")
	}
}

// LoopFS makes a sparse image with a fresh xfs (reflink=1) or btrfs
// filesystem, mounts it, and returns the mount point. It is unmounted at
// the end of the test.
func LoopFS(t testing.TB, fstype string, size int64) string {
	t.Helper()
	RequireRoot(t)
	base := Dir(t)
	img := filepath.Join(base, fstype+".img")
	mnt := filepath.Join(base, fstype)
	if err := store.CreateLoopFS(img, mnt, fstype, size); err != nil {
		t.Fatalf("loop %s: %v", fstype, err)
	}
	// Registered after Dir's cleanup, so it runs first.
	t.Cleanup(func() {
		if err := fsutil.UnmountAllUnder(mnt); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}
