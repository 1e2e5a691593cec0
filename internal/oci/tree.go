package oci

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Everything a pull does inside its data dir goes through the data dir's
// descriptor: paths are resolved beneath it and never through a symlink
// (openat2), so an entry swapped for a link cannot send a write, chown or
// chmod of root's anywhere else. The work dir is root's alone until the
// tree is handed to the server user at the end (golden.NewWorkDir); this
// is the second fence.
const beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openDataDir opens a work dir's data dir for the calls below.
func openDataDir(data string) (int, error) {
	fd, err := unix.Open(data, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", data, err)
	}
	return fd, nil
}

// noOpenat2 is set on kernels without it (before 5.6), and in tests of
// the fallback.
var noOpenat2 atomic.Bool

// openBeneath opens rel beneath dir without following any symlink.
func openBeneath(dir int, rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(dir, rel, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: beneath})
		if err != unix.ENOSYS {
			if err != nil {
				return -1, &fs.PathError{Op: "open", Path: rel, Err: err}
			}
			return fd, nil
		}
		noOpenat2.Store(true)
	}
	fd, err := openEach(dir, rel, flags, mode)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	return fd, nil
}

// openEach is openBeneath without openat2: one openat per component,
// each with O_NOFOLLOW (manifest paths are clean and hold no "..").
func openEach(dir int, rel string, flags int, mode uint32) (int, error) {
	parts := strings.Split(rel, "/")
	at := dir
	for i, p := range parts {
		if p == "" || p == ".." {
			return -1, unix.EINVAL
		}
		f, m := unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(0)
		if i == len(parts)-1 {
			f, m = flags, mode
		}
		fd, err := unix.Openat(at, p, f, m)
		if at != dir {
			unix.Close(at)
		}
		if err != nil {
			return -1, err
		}
		at = fd
	}
	return at, nil
}

// parentOf opens the directory holding rel and returns it with rel's
// last component.
func parentOf(dir int, rel string) (int, string, error) {
	fd, err := openBeneath(dir, filepath.Dir(rel), unix.O_DIRECTORY|unix.O_RDONLY, 0)
	return fd, filepath.Base(rel), err
}

// makeTree creates a golden's directories and symlinks in the data dir
// (dir), before any layer writes a file into them. Directories start
// private; finishTree gives them their modes.
func makeTree(dir int, files []golden.File) error {
	sorted := append([]golden.File(nil), files...)
	// A parent's path is a prefix of its children's, so it sorts first.
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		t := fs.FileMode(f.Mode).Type()
		if t != fs.ModeDir && t != fs.ModeSymlink {
			continue
		}
		pfd, name, err := parentOf(dir, f.Path)
		if err != nil {
			return fmt.Errorf("create golden tree: %w", err)
		}
		if t == fs.ModeDir {
			err = unix.Mkdirat(pfd, name, 0o700)
		} else {
			err = unix.Symlinkat(f.Link, pfd, name)
		}
		unix.Close(pfd)
		if err != nil {
			return fmt.Errorf("create golden tree: %s: %w", f.Path, err)
		}
	}
	return nil
}

// finishTree gives every entry its manifest mode and the server user,
// children before their directories, and last the data dir itself.
func finishTree(dir int, files []golden.File, u store.User) error {
	sorted := append([]golden.File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path > sorted[j].Path })
	for _, f := range sorted {
		if err := finishEntry(dir, f, u); err != nil {
			if os.IsNotExist(err) {
				continue // a missing file: Verify names it
			}
			return fmt.Errorf("hand over %s: %w", f.Path, err)
		}
	}
	if u.Dropped() {
		return unix.Fchown(dir, u.UID, u.GID)
	}
	return nil
}

func finishEntry(dir int, f golden.File, u store.User) error {
	mode := fs.FileMode(f.Mode)
	if mode.Type() == fs.ModeSymlink {
		if !u.Dropped() {
			return nil
		}
		pfd, name, err := parentOf(dir, f.Path)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		return unix.Fchownat(pfd, name, u.UID, u.GID, unix.AT_SYMLINK_NOFOLLOW)
	}
	flags := unix.O_RDONLY | unix.O_NONBLOCK
	if mode.IsDir() {
		flags |= unix.O_DIRECTORY
	}
	fd, err := openBeneath(dir, f.Path, flags, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if u.Dropped() {
		if err := unix.Fchown(fd, u.UID, u.GID); err != nil {
			return err
		}
	}
	return unix.Fchmod(fd, uint32(mode.Perm()))
}

// maxConfigBytes bounds what an engine's artifact check reads of one
// file: server config files are small.
const maxConfigBytes = 1 << 20

// readBeneath reads a small regular file of the data dir for an
// engine's artifact check.
func readBeneath(dir int, rel string) ([]byte, error) {
	fd, err := openBeneath(dir, rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, errs.Invalid("the golden's %s is over %d bytes, too big for a config file to check; refused", rel, maxConfigBytes)
	}
	return data, nil
}

// testHookTree is called with the work dir once the tree is made, before
// any layer is written (tests check who could touch it then).
var testHookTree func(tmp string)
