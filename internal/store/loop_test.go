package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

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

// An XFS store image is attached with cache flushes off (its loop device
// in "write through" mode) and stamped with this boot's id; unmounting it
// syncs it and removes the stamp. An image stamped by an earlier boot is
// checked before it is mounted: a clean one mounts, a damaged one is
// refused with one line naming the damage and the fix, and nothing stays
// mounted.
func TestXFSImageWithoutFlushes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("loop mounts need root; CI runs as root")
	}
	for _, tool := range []string{"xfs_db", "xfs_repair"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (xfsprogs): %v", tool, err)
		}
	}
	root := filepath.Join(t.TempDir(), "store")
	img := ImagePath(root)
	if err := CreateLoopFS(img, root, "xfs", 300<<20); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = UnmountImage(root) })
	stamp := func() string {
		buf := make([]byte, 64)
		n, err := unix.Lgetxattr(img, attachedRecord, buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	dev, err := fsutil.LoopDevice(filepath.Join(root, "a", "b"))
	if err != nil || dev == "" {
		t.Fatalf("no loop device found under %s: %q %v", root, dev, err)
	}
	if !fsutil.LoopWriteThrough(dev) {
		t.Fatalf("%s still passes flushes on", dev)
	}
	if got := stamp(); got != bootID() || got == "" {
		t.Fatalf("attach record %q, want this boot's id %q", got, bootID())
	}
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(root, "f"), &st); err != nil {
		t.Fatal(err)
	}
	ino := st.Ino
	if err := fsutil.SyncBacking(root); err != nil {
		t.Fatal(err)
	}
	if err := UnmountImage(root); err != nil {
		t.Fatal(err)
	}
	if got := stamp(); got != "" {
		t.Fatalf("attach record %q left after unmounting", got)
	}
	// The device keeps its mode for its next user: unmounting gives it
	// its flushes back, and a free device left without them (by a plain
	// umount) is reset at the next store mount.
	if fsutil.LoopWriteThrough(dev) {
		t.Fatalf("%s still drops flushes after the store was unmounted", dev)
	}
	if err := fsutil.SetLoopWriteThrough(dev, true); err != nil {
		t.Fatal(err)
	}
	if reset := fsutil.ResetFreeLoops(); !slices.Contains(reset, dev) || fsutil.LoopWriteThrough(dev) {
		t.Fatalf("free %s left dropping flushes (reset %v)", dev, reset)
	}

	// Attached in an earlier boot, clean: checked, mounted, stamped anew.
	earlier := "00000000-0000-4000-8000-000000000000"
	if err := unix.Lsetxattr(img, attachedRecord, []byte(earlier), 0); err != nil {
		t.Fatal(err)
	}
	if err := MountImage(img, root); err != nil {
		t.Fatalf("clean image from an earlier boot: %v", err)
	}
	if got := stamp(); got != bootID() {
		t.Fatalf("attach record %q after the check, want %q", got, bootID())
	}
	if b, err := os.ReadFile(filepath.Join(root, "f")); err != nil || string(b) != "x" {
		t.Fatalf("file written before: %q %v", b, err)
	}
	if err := UnmountImage(root); err != nil {
		t.Fatal(err)
	}

	// Damaged, from an earlier boot: refused. First damage the kernel
	// mounts without noticing (a wrong link count, found by the check),
	// then damage that stops the mount (a free-space count that does not
	// add up).
	fi, err := os.Stat(img)
	if err != nil {
		t.Fatal(err)
	}
	damage := []struct{ db, finding string }{
		{"inode " + fmt.Sprint(ino) + "|write core.nlinkv2 3", "nlinks from 3 to 1"},
		{"agf 0|write -d freeblks 1", "agf_freeblks 1"},
	}
	for _, d := range damage {
		args := []string{"-x"}
		for _, c := range strings.Split(d.db, "|") {
			args = append(args, "-c", c)
		}
		if out, err := exec.Command("xfs_db", append(args, img)...).CombinedOutput(); err != nil {
			t.Fatalf("xfs_db %s: %v: %s", d.db, err, out)
		}
		if err := unix.Lsetxattr(img, attachedRecord, []byte(earlier), 0); err != nil {
			t.Fatal(err)
		}
		err = MountImage(img, root)
		if err == nil {
			t.Fatalf("%s: a damaged image from an earlier boot was mounted", d.db)
		}
		msg := err.Error()
		for _, want := range []string{img, "damaged", d.finding, "xfs_repair " + img, "dbfork store init"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not say %q", d.db, msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("error is not one line: %q", msg)
		}
		if ok, _ := fsutil.IsMountpoint(root); ok {
			t.Fatalf("%s: %s left mounted after the refusal", d.db, root)
		}
		if got := stamp(); got != earlier {
			t.Fatalf("%s: attach record %q after the refusal, want the earlier boot's (the check must run again)", d.db, got)
		}
	}
	if fi2, err := os.Stat(img); err != nil || fi2.Size() != fi.Size() {
		t.Fatalf("the refused image changed: %v", err)
	}
}
