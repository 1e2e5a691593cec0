package backend

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Operations on a clone through directory descriptors (restore.go): no
// path is resolved again, so nothing a server user swapped in can send
// root elsewhere.

// setModeOwner gives the open file fd the mode and owner of g, as finish
// does by path: no set-id bit (see cloneMode).
func setModeOwner(fd int, g *unix.Stat_t) error {
	if err := unix.Fchmod(fd, cloneMode(g.Mode)); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return unix.Fchown(fd, int(g.Uid), int(g.Gid))
}

// removeAt removes name from the open directory dfd, with everything
// below it, through descriptors; it never crosses into another
// filesystem (nothing below a clone is mounted, and nothing that is may
// be emptied).
func removeAt(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	defer unix.Close(sub)
	if err := sameFS(dfd, sub, name); err != nil {
		return err
	}
	names, err := fsutil.NamesAt(sub)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := removeAt(sub, n); err != nil {
			return err
		}
	}
	if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return nil
}

// sameFS refuses a directory on another filesystem than its parent's.
func sameFS(parent, sub int, name string) error {
	var a, b unix.Stat_t
	if err := unix.Fstat(parent, &a); err != nil {
		return err
	}
	if err := unix.Fstat(sub, &b); err != nil {
		return err
	}
	if a.Dev != b.Dev {
		return fmt.Errorf("%s is a mount point in a clone; leaving it alone", name)
	}
	return nil
}

// readlinkAt reads the symlink name in the open directory dfd.
func readlinkAt(dfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
