package fsutil

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ChmodNoFollow sets p's mode without following a symlink at p (then it
// fails with ELOOP): fchmodat cannot refuse to follow on Linux, but an
// O_PATH|O_NOFOLLOW descriptor pins the entry itself and /proc/self/fd
// hands chmod a path that is not resolved by name again.
func ChmodNoFollow(p string, mode uint32) error {
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("chmod %s: %w", p, unix.ELOOP)
	}
	if err := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode&0o7777); err != nil {
		return fmt.Errorf("chmod %s: %w", p, err)
	}
	return nil
}
