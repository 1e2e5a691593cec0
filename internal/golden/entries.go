package golden

import (
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
)

// What a golden may hold (issue 29, audit H1). Every clone's server, and
// so every test's SQL, runs programs in a copy of the golden, and root
// walks, hashes, copies and chowns it. So a golden holds only
// directories, regular files and symlinks: a device node would open the
// host's devices, a FIFO hangs whoever opens it, and nothing carries a
// set-id bit, which would let a test leave its instance's uid. A file
// linked from elsewhere (more than one hard link) is refused too: chowning
// it to the server user would hand over its other name as well, and the
// build's uid, recycled for later builds and instances, could reach the
// golden's bytes through a link it planted outside.
//
// The hand-over at the end of a build (shareTree) strips set-id bits, and
// refuses everything else; the manifest (listFiles) and verify refuse what
// is left, so a golden with one is never published nor cloned.

// badType says why an entry of this st_mode and link count cannot be in a
// golden at all, or "".
func badType(mode uint32, nlink uint64) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return ""
	case unix.S_IFREG, unix.S_IFLNK:
		if nlink > 1 {
			return fmt.Sprintf("has %d hard links (a file linked from outside the data dir)", nlink)
		}
		return ""
	case unix.S_IFCHR:
		return "is a character device"
	case unix.S_IFBLK:
		return "is a block device"
	case unix.S_IFIFO:
		return "is a FIFO"
	case unix.S_IFSOCK:
		return "is a socket"
	}
	return fmt.Sprintf("is of an unknown kind (mode %o)", mode)
}

// badBits says which set-id or sticky bit an entry carries that a golden
// never does, or "". A directory's sticky bit is harmless and kept.
func badBits(mode uint32) string {
	switch {
	case mode&unix.S_ISUID != 0:
		return "has the set-user-id bit"
	case mode&unix.S_ISGID != 0:
		return "has the set-group-id bit"
	case mode&unix.S_ISVTX != 0 && mode&unix.S_IFMT != unix.S_IFDIR:
		return "has the sticky bit"
	}
	return ""
}

// entryRefused is the one-line error for an entry rel of a data dir that
// cannot be part of a golden.
func entryRefused(rel, why string) error {
	return errs.Invalid("golden data dir: %s %s; a golden holds only directories, regular files and symlinks, without set-id bits (the recipe's SQL or commands left it: remove it in the recipe)", rel, why)
}

// refuseEntry checks one entry as listFiles and Verify see it.
func refuseEntry(rel string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no stat information", rel)
	}
	if why := badType(st.Mode, uint64(st.Nlink)); why != "" {
		return entryRefused(rel, why)
	}
	if why := badBits(st.Mode); why != "" {
		return entryRefused(rel, why)
	}
	return nil
}

// stripMode is a manifest mode without set-id bits (and without a
// file's sticky bit), as shareTree leaves the entry.
func stripMode(m fs.FileMode) fs.FileMode {
	m &^= fs.ModeSetuid | fs.ModeSetgid
	if !m.IsDir() {
		m &^= fs.ModeSticky
	}
	return m
}

// CheckFile refuses a manifest entry (a pulled or imported golden's,
// before anything is written) whose mode says it is something a golden
// cannot hold: a device, FIFO or socket, or a set-id or file sticky bit.
func CheckFile(f File) error {
	m := fs.FileMode(f.Mode)
	why := ""
	switch {
	case m&fs.ModeCharDevice != 0:
		why = "is a character device"
	case m&fs.ModeDevice != 0:
		why = "is a block device"
	case m&fs.ModeNamedPipe != 0:
		why = "is a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		why = "is a socket"
	case m.Type()&^(fs.ModeDir|fs.ModeSymlink) != 0:
		why = "is of an unknown kind (" + m.Type().String() + ")"
	case m&fs.ModeSetuid != 0:
		why = "has the set-user-id bit"
	case m&fs.ModeSetgid != 0:
		why = "has the set-group-id bit"
	case m&fs.ModeSticky != 0 && !m.IsDir():
		why = "has the sticky bit"
	default:
		return nil
	}
	return errs.Invalid("golden manifest: %s %s; a golden holds only directories, regular files and symlinks, without set-id bits (refused: this artifact was not made by dbfork, or was changed)", f.Path, why)
}
