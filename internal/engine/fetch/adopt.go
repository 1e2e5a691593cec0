package fetch

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
)

// adopt turns the tree a worker unpacked into an install: every entry
// root's (as root) and writable by its owner only, readable and runnable
// by everyone (the server user runs it, nobody changes it). It works
// through directory fds and never follows a link, so nothing the worker
// left (a link out, a hard link to another's file, a set-id bit, a
// device, a fifo) turns root's chown or chmod onto something else: such
// entries are refused. The worker must be gone (worker.end) first.
// workerUID is the uid every entry must belong to (-1: ours).
func adopt(dir string, workerUID int) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(fd)
	a := adopter{uid: workerUID, asRoot: os.Geteuid() == 0}
	if err := a.dir(fd, ""); err != nil {
		return err
	}
	return a.own(fd, 0o755)
}

type adopter struct {
	uid    int
	asRoot bool
}

// own gives the open entry to root (as root) and sets its mode.
func (a adopter) own(fd int, mode uint32) error {
	if a.asRoot {
		if err := unix.Fchown(fd, 0, 0); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, mode)
}

func (a adopter) dir(dfd int, rel string) error {
	names, err := readNames(dfd)
	if err != nil {
		return fmt.Errorf("read %s: %w", "./"+rel, err)
	}
	for _, name := range names {
		p := path.Join(rel, name)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if a.uid >= 0 && int(st.Uid) != a.uid {
			// Not made by the worker: a hard link to someone else's file.
			return errs.Invalid("%s in the unpacked build belongs to uid %d, not the unpacker; refused", p, st.Uid)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if err := a.link(dfd, name, p); err != nil {
				return err
			}
		case unix.S_IFDIR:
			if err := a.sub(dfd, name, p, &st, true); err != nil {
				return err
			}
		case unix.S_IFREG:
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
				return errs.Invalid("%s in the unpacked build is set-user-ID or set-group-ID; refused", p)
			}
			if err := a.sub(dfd, name, p, &st, false); err != nil {
				return err
			}
		default:
			return errs.Invalid("%s in the unpacked build is not a file, directory or symlink; refused", p)
		}
	}
	return nil
}

// sub opens one entry (no link followed, the same inode as stat saw),
// recurses into a dir, then owns it.
func (a adopter) sub(dfd int, name, p string, st *unix.Stat_t, isDir bool) error {
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	if isDir {
		flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat(dfd, name, flags, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer unix.Close(fd)
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Ino != st.Ino || now.Dev != st.Dev {
		return fmt.Errorf("%s changed while it was adopted", p)
	}
	mode := uint32(0o644)
	if isDir || st.Mode&0o111 != 0 {
		mode = 0o755
	}
	if isDir {
		if err := a.dir(fd, p); err != nil {
			return err
		}
	}
	return a.own(fd, mode)
}

// link checks that a symlink stays inside the tree and owns it.
func (a adopter) link(dfd int, name, p string) error {
	target, err := readlinkat(dfd, name)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	inside := path.Clean(path.Join(path.Dir(p), target))
	if path.IsAbs(target) || inside == ".." || strings.HasPrefix(inside, "../") {
		return errs.Invalid("%s links outside the install dir (%s); refused", filepath.FromSlash(p), target)
	}
	if a.asRoot {
		return unix.Fchownat(dfd, name, 0, 0, unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

func readNames(dfd int) ([]string, error) {
	fd, err := unix.Dup(dfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	if _, err := f.Seek(0, 0); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

func readlinkat(dfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", fmt.Errorf("link target too long")
	}
	return string(buf[:n]), nil
}
