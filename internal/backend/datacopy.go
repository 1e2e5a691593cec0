package backend

import (
	"errors"
	"os"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// CopyDataDir makes dst (which must not exist) a private, writable copy of
// the data dir src, as cheaply as the store allows: by the golden side
// that holds src (a btrfs snapshot of a subvolume), else a reflink of
// every file (XFS with reflink=1, btrfs), else a byte copy that keeps
// holes. Owners, modes and xattrs are kept (see copyTree). It returns how
// it copied: the golden side's backend name ("btrfs"), "reflink" or
// "copy".
//
// A build that starts from an intermediate golden uses it: unlike a
// clone made by a Backend, the copy stands alone (no lower dir, no
// mount), so it can be built on and published itself.
func CopyDataDir(src, dst string) (string, error) {
	if g, name := holder(src); g != nil {
		if err := g.CopyGolden(src, dst); err == nil {
			return name, nil
		}
	}
	var noShare atomic.Bool // files are copied on several goroutines
	err := copyTree(src, dst, func(in, out *os.File) error {
		if !noShare.Load() {
			err := reflinkFile(in, out)
			if err == nil {
				return keepMtime(in, out)
			}
			if !cannotShare(err) {
				return err
			}
			noShare.Store(true) // this filesystem cannot: bytes for every file from here
		}
		if err := byteCopy(in, out); err != nil {
			return err
		}
		return keepMtime(in, out)
	}, false) // a golden's copy: the stamp marks go along
	if noShare.Load() {
		return "copy", err
	}
	return "reflink", err
}

// keepMtime gives out the modification time of in: the copy holds the
// same bytes, and an engine that marked a file as done with (PostgreSQL's
// page stamping, by size and mtime) then need not read it again. A write
// after the copy sets a new mtime.
func keepMtime(in, out *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(in.Fd()), &st); err != nil {
		return err
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(out.Fd())), ts, 0)
}

// cannotShare reports the errors FICLONE gives where extents cannot be
// shared (the filesystem, or src and dst on different ones).
func cannotShare(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTTY)
}
