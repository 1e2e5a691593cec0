package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Every store root opens is nosuid,nodev (issue 29, audit H1): servers run
// tests' SQL, SQL runs programs, and a set-id file or a device node in a
// golden, a build dir or a clone must not work. A loop-backed store is
// mounted so (loop.go). A plain store — a dir on a host filesystem that
// shares extents already (XFS, btrfs), on a disk with too little room for
// an image, or chosen with --fs plain — gets a bind mount of itself with
// those flags, covering goldens, build and pull work dirs and clones
// alike. It stays until `dbfork store umount` (or a reboot); the next
// open makes it again. The mount table is its record (fsutil.IsSelfBind).
//
// A user's own store needs none: an unprivileged user cannot mount, and
// cannot use a set-id bit for more than they are (a file setuid to their
// own uid gives nothing). The least-privilege store root makes for a user
// (`store init --user`) is an image mounted nosuid,nodev.

// ensureNoSuid makes sure the store at root is on a nosuid,nodev mount,
// binding it onto itself if need be (root only).
func ensureNoSuid(root string, o Options) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if ok, err := fsutil.NoSuidNoDev(root); err != nil || ok {
		return err
	}
	// Processes opening the store at once take turns (a lock on the
	// store dir itself, the same inode under the bind), so one bind is
	// made, not one per process.
	fd, err := fsutil.OpenDirNoFollow(root)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", root, err)
	}
	if ok, err := fsutil.NoSuidNoDev(root); err != nil || ok {
		return err
	}
	if fsutil.IsSelfBind(root) {
		return fsutil.RemountNoSuid(root) // a bind a crash left unfinished
	}
	if below := mountedBelow(root); below != "" {
		// A bind now would hide the clone mounted there from its own
		// teardown; the next open after they are gone makes it.
		notify(o, "store %s is not yet on a nosuid,nodev mount: %s is mounted in it; it will be once no clone is (`dbfork down --all`)", root, below)
		return nil
	}
	err = fsutil.BindNoSuid(root)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		notify(o, "store %s is not on a nosuid,nodev mount and this root may not mount (%v): a set-id file a test leaves in a clone would work; give the process CAP_SYS_ADMIN, or put the store on a nosuid,nodev filesystem", root, err)
		return nil
	}
	return err
}

// mountedBelow names a mount point strictly below root, or "".
func mountedBelow(root string) string {
	points, _ := fsutil.MountsUnder(root)
	clean := filepath.Clean(root)
	if r, err := filepath.EvalSymlinks(clean); err == nil {
		clean = r
	}
	for _, p := range points {
		if p != clean {
			return p
		}
	}
	return ""
}

func notify(o Options, format string, a ...any) {
	if o.Notify != nil {
		o.Notify(fmt.Sprintf(format, a...))
	}
}

// PlainBound reports whether root is a plain store that Open mounted
// nosuid,nodev on itself: `store umount` unmounts it like an image.
func PlainBound(root string) bool { return fsutil.IsSelfBind(root) }
