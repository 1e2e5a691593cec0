package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Options say how Open may set up a store that does not exist yet.
type Options struct {
	// AutoImage puts a new store whose filesystem cannot share extents
	// (ext4, tmpfs, overlay...) on a loop-backed XFS image, so clones get
	// block-level copy-on-write without any set-up (root only).
	AutoImage bool
	// Notify receives one line for the user when Open decided something
	// they should know (an image was made, or could not be).
	Notify func(string)
	// CowExtSize is Store.CowExtSize.
	CowExtSize *uint32
}

// Limits of an automatic image: sparse, so only what is written uses the
// host's disk; sized to what the disk can spare, with a cap.
const (
	autoImageMin = 2 << 30   // below this the store stays plain
	autoImageMax = 256 << 30 // a sensible cap for test data
)

// AutoImageSize is the size of an automatic image on a disk with free
// bytes available: most of it (the image is sparse), capped; 0 when the
// disk cannot spare a useful minimum.
func AutoImageSize(free uint64) int64 {
	size := int64(free / 10 * 9)
	if size > autoImageMax {
		size = autoImageMax
	}
	if size < autoImageMin {
		return 0
	}
	return size &^ (1<<20 - 1)
}

// autoImage makes a new store at root live on an XFS image when root's
// filesystem cannot share extents. It reports what it did through o.Notify;
// when the image cannot be made the store stays plain (and says why).
func autoImage(root string, o Options) error {
	parent := filepath.Dir(root)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", parent, err)
	}
	// Two processes creating the same store: the second waits on a lock of
	// the parent dir itself (no lock file left beside the store), then
	// finds the store made.
	pd, err := os.Open(parent)
	if err != nil {
		return err
	}
	defer pd.Close()
	if err := unix.Flock(int(pd.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", parent, err)
	}
	if _, err := os.Lstat(root); err == nil {
		return nil
	}
	if _, err := os.Lstat(ImagePath(root)); err == nil {
		return nil // ensureLoopMounted deals with it
	}
	fs, _ := fsutil.FSType(parent)
	if shares, _ := canShareExtents(parent); shares {
		return nil
	}
	say := func(format string, a ...any) {
		if o.Notify != nil {
			o.Notify(fmt.Sprintf(format, a...))
		}
	}
	free, err := fsutil.FreeBytes(parent)
	if err != nil {
		return err
	}
	size := AutoImageSize(free)
	if size == 0 {
		say("store %s stays plain %s: only %s free, too little for a copy-on-write image (clones copy whole files)", root, fs, human(int64(free)))
		return nil
	}
	img := ImagePath(root)
	if err := CreateLoopFS(img, root, "xfs", size); err != nil {
		// Nothing of the image is left (CreateLoopFS removes it); go on
		// with a plain store rather than fail the user's command.
		say("store %s stays plain %s: could not make an XFS image (%v); opt out of trying with --fs plain", root, fs, err)
		return nil
	}
	say("store %s: %s cannot share extents, so the store lives on a sparse %s XFS image %s (loop, discard); opt out with `dbfork store init --fs plain`", root, fs, human(size), img)
	return nil
}

// canShareExtents tries FICLONE between two scratch files in dir.
func canShareExtents(dir string) (bool, error) {
	src, err := os.CreateTemp(dir, ".dbfork-reflink-probe-")
	if err != nil {
		return false, err
	}
	defer os.Remove(src.Name())
	defer src.Close()
	if _, err := src.Write(make([]byte, 4096)); err != nil {
		return false, err
	}
	dst, err := os.CreateTemp(dir, ".dbfork-reflink-probe-")
	if err != nil {
		return false, err
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	err = unix.IoctlFileClone(int(dst.Fd()), int(src.Fd()))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTTY) {
		return false, nil
	}
	return false, err
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.0f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
