package store

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/textutil"
)

// A loop-backed store keeps its filesystem in ROOT.img beside ROOT. Open
// remounts it after a reboot, but only an image dbfork recorded as its own
// (see checkImage).

// ImagePath is where a loop-backed store keeps its image.
func ImagePath(root string) string { return filepath.Clean(root) + ".img" }

func ensureLoopMounted(root string) error {
	img := ImagePath(root)
	if _, err := os.Stat(img); err != nil {
		return nil // not a loop-backed store
	}
	if ok, err := fsutil.IsMountpoint(root); err != nil || ok {
		return err
	}
	if os.Geteuid() != 0 {
		return errs.Unsupported("the store image %s is not mounted at %s; mount it as root: sudo dbfork --store %s store mount", img, root, root)
	}
	if err := checkImage(img, root); err != nil {
		return err
	}
	return MountImage(img, root)
}

// AdoptImage records an existing image as the store's own after the same
// ownership checks, and mounts it: for images made before dbfork recorded
// them (`dbfork store mount`).
func AdoptImage(root string) error {
	img := ImagePath(root)
	if err := checkSecurePath(root); err != nil {
		return err
	}
	if _, err := os.Lstat(img); err != nil {
		return errs.NotFound("%s is not a loop-backed store (no %s)", root, img)
	}
	if err := checkImage(img, root); err != nil {
		fi, _ := os.Lstat(img)
		if fi == nil || !fi.Mode().IsRegular() {
			return err
		}
		if oerr := checkOwned(img, fi, false); oerr != nil {
			return err
		}
		if err := recordImage(img, root); err != nil {
			return err
		}
	}
	if ok, err := fsutil.IsMountpoint(root); err != nil || ok {
		return err
	}
	return MountImage(img, root)
}

// MountImage loop-mounts a filesystem image at dir. Buffered loop I/O (the
// default) lets clones sharing extents share the host page cache.
func MountImage(img, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// Buffered loop I/O (the default, no direct-io): the host caches the
	// image's blocks once for every clone that shares them, which nearly
	// doubled an unwarmed clone's throughput (docs/performance.md).
	// nosuid,nodev: nothing on the image may gain privileges; discard: space
	// freed inside (deleted goldens and clones) goes back to the host.
	// Processes opening one store at once take turns on the image (a
	// lock on the image file itself: autoImage already holds the parent
	// dir's), and one that finds it mounted by another is done.
	lf, err := lockImage(img)
	if err != nil {
		return err
	}
	defer lf.Close()
	if sameFile(mountedFrom(dir), img) {
		return nil
	}
	fsutil.ResetFreeLoops() // what unmounts outside dbfork left (fsutil/loopcache.go)
	xfs := isXFS(img)
	if xfs {
		if err := checkAfterStop(img, dir); err != nil {
			return err
		}
		if err := recordAttached(img); err != nil {
			return err
		}
	}
	var out []byte
	for attempt := 0; ; attempt++ {
		out, err = exec.Command("mount", "-o", "loop,nosuid,nodev,discard", img, dir).CombinedOutput()
		// mount picks a free loop device and may lose it to another
		// mount doing the same at the same moment ("/dev/loopN already
		// mounted or mount point busy"): pick again, unless dir itself
		// is what is mounted.
		if err == nil || attempt == 4 || !strings.Contains(string(out), "already mounted or mount point busy") {
			break
		}
		if mounted, merr := fsutil.IsMountpoint(dir); merr != nil || mounted {
			break
		}
		time.Sleep(time.Duration(50*(attempt+1)) * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("mount %s at %s: %v: %s", img, dir, err, textutil.OneLine(string(out), "; ", 0))
	}
	if err := setLoopCache(dir, xfs); err != nil {
		_ = fsutil.Unmount(dir)
		return err
	}
	// Root's stores must be reachable by every server uid; a user store's
	// root belongs to its user, who keeps it 0700 (userstore.go).
	if fi, err := os.Stat(dir); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			return nil
		}
	}
	return os.Chmod(dir, 0o755)
}

// lockImage opens img and takes its exclusive lock (released when the
// file is closed): mounts and unmounts of one image take turns.
func lockImage(img string) (*os.File, error) {
	lf, err := os.Open(img)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		lf.Close()
		return nil, fmt.Errorf("lock %s: %w", img, err)
	}
	return lf, nil
}

// sameFile says whether paths a and b name one existing file.
func sameFile(a, b string) bool {
	if a == "" {
		return false
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// mountedFrom names the image file behind the loop device mounted at dir,
// or "" if dir is not a loop mount.
func mountedFrom(dir string) string {
	ms, err := fsutil.Mounts()
	if err != nil {
		return ""
	}
	clean := filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(clean); err == nil {
		clean = r
	}
	src := ""
	for _, m := range ms {
		if m.Point == clean {
			src = m.Source // the last one is on top
		}
	}
	dev, ok := fsutil.LoopName(src)
	if !ok {
		return ""
	}
	img, _ := fsutil.LoopBackingFile(dev)
	return img
}

// CreateLoopFS makes a sparse image of size bytes with the given
// filesystem (xfs with reflink, or btrfs) and mounts it at dir, which must
// be empty or missing.
func CreateLoopFS(img, dir, fstype string, size int64) error {
	return createLoopFS(img, dir, fstype, size, true)
}

// loopFilesystems are the filesystems a loop-backed store can be made
// of: how to make one, and the Debian package with that program.
var loopFilesystems = map[string]struct {
	mkfs []string
	pkg  string
}{
	"xfs":   {[]string{"mkfs.xfs", "-q", "-m", "reflink=1"}, "xfsprogs"},
	"btrfs": {[]string{"mkfs.btrfs", "-q"}, "btrfs-progs"},
}

// CheckLoopFS refuses a filesystem a loop-backed store cannot be made of.
func CheckLoopFS(fstype string) error {
	if _, ok := loopFilesystems[fstype]; !ok {
		return errs.Invalid("store filesystem %q: use xfs or btrfs (--fs)", fstype)
	}
	return nil
}

// createLoopFS makes and records the image, and mounts it when mount is
// set (a user store is mounted through its fstab entry instead).
func createLoopFS(img, dir, fstype string, size int64, mount bool) error {
	if err := CheckLoopFS(fstype); err != nil {
		return err
	}
	lf := loopFilesystems[fstype]
	mkfs := append(append([]string(nil), lf.mkfs...), img)
	if os.Geteuid() != 0 {
		return errs.Unsupported("creating a loop-backed store needs root (loop devices and mount); run it with sudo")
	}
	min := int64(300 << 20) // XFS and btrfs refuse much smaller images
	if size < min {
		return errs.Invalid("store size %d bytes is too small; use at least 300M", size)
	}
	if _, err := exec.LookPath(mkfs[0]); err != nil {
		return errs.MissingTool("%s not found on PATH; install it: apt-get install %s", mkfs[0], lf.pkg)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return errs.Conflict("%s is not empty; a loop-backed store must start empty (use another --store, or remove what is there)", dir)
	}
	if _, err := os.Stat(img); err == nil {
		return errs.Conflict("image %s already exists; remove it first or use another --store", img)
	}
	if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	f.Close()
	if err == nil {
		var out []byte
		out, err = exec.Command(mkfs[0], mkfs[1:]...).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%s: %v: %s", mkfs[0], err, textutil.OneLine(string(out), "; ", 0))
		}
	}
	if err == nil {
		err = recordImage(img, filepath.Clean(dir))
	}
	if err == nil && mount {
		err = MountImage(img, dir)
	}
	if err != nil {
		os.Remove(img)
		return err
	}
	return nil
}

// UnmountImage unmounts a loop-backed store; the loop device goes with it
// (mount -o loop sets autoclear). The image is then synced to disk and
// its attach record removed: the next mount needs no check.
func UnmountImage(dir string) error {
	img := mountedFrom(dir)
	if img == "" {
		return fsutil.Unmount(dir)
	}
	lf, err := lockImage(img)
	if err != nil {
		return err
	}
	defer lf.Close()
	// Flushes back on first: the device keeps its mode after it is
	// detached, for whoever attaches it next.
	if dev, _ := fsutil.LoopDevice(dir); dev != "" && fsutil.LoopWriteThrough(dev) {
		if err := fsutil.SetLoopWriteThrough(dev, false); err != nil {
			return err
		}
	}
	if err := fsutil.Unmount(dir); err != nil {
		return err
	}
	if sameFile(mountedFrom(dir), img) {
		return nil // mounted there more than once: still attached
	}
	return detached(lf)
}
