package engine

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// stampedMark is the xattr a file an engine's seal stamped carries (page
// LSNs, frozen transaction ids): its size and mtime right after stamping.
// A file that still has both was not written since (every write sets the
// mtime, and the copy of an intermediate golden keeps it and the xattr),
// so stamping it again would change nothing: an incremental build's seal
// skips the seed's files instead of reading them all.
const stampedMark = fsutil.StampedXattr

func stampMarkOf(st *unix.Stat_t) string {
	return fmt.Sprintf("%d:%d.%09d", st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

// MarkStamped records that f, as it is now, is stamped. Without user
// xattrs on the filesystem nothing is recorded and the next seal stamps
// it again.
func MarkStamped(f *os.File) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return
	}
	_ = unix.Fsetxattr(int(f.Fd()), stampedMark, []byte(stampMarkOf(&st)), 0)
}

// StampedAlready reports whether path is unchanged since MarkStamped.
func StampedAlready(path string) bool {
	var st unix.Stat_t
	if unix.Lstat(path, &st) != nil {
		return false
	}
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(path, stampedMark, buf)
	return err == nil && string(buf[:n]) == stampMarkOf(&st)
}
