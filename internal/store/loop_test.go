package store

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Processes opening one store at once may both try to mount its image:
// the one that loses the race finds the image mounted by the other and
// succeeds too (it used to fail with "already mounted or mount point
// busy", and CreateLoopFS then removed the image the other had mounted).
func TestConcurrentMountsOfOneImage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop mounts need root; CI runs as root")
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "store")
	img := ImagePath(root)
	if err := CreateLoopFS(img, root, "xfs", 300<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnmountImage(root) })
	for round := 0; round < 5; round++ {
		if err := UnmountImage(root); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = MountImage(img, root) }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d, mount %d: %v", round, i, err)
			}
		}
		if !sameFile(mountedFrom(root), img) {
			t.Fatalf("round %d: %s is not mounted from %s", round, root, img)
		}
		ms, _ := fsutil.MountsUnder(root)
		if len(ms) != 1 {
			t.Fatalf("round %d: %d mounts at %s, want one: %v", round, len(ms), root, ms)
		}
	}
	if err := UnmountImage(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(img); err != nil {
		t.Fatalf("the image is gone: %v", err)
	}
}
