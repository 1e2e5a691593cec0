package fsutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

// Root changes owners and modes inside stores through directory
// descriptors: every entry is named relative to its parent's fd, and no
// call follows a symlink, so an entry swapped for a link cannot send root
// elsewhere (audit 696928f, H1).

// OpenDirNoFollow opens the directory p itself; a symlink at p is refused.
func OpenDirNoFollow(p string) (int, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", p, err)
	}
	return fd, nil
}

// WalkAt calls fn for every entry below the open directory dfd (not dfd
// itself), parents before their children, in name order. fn gets the
// parent's fd, the entry's name in it, its path relative to dfd and its
// lstat. A directory is entered with O_NOFOLLOW and must be the one fn
// was shown.
func WalkAt(dfd int, fn func(dir int, name, rel string, st *unix.Stat_t) error) error {
	return walkAt(dfd, "", fn)
}

func walkAt(dfd int, prefix string, fn func(dir int, name, rel string, st *unix.Stat_t) error) error {
	names, err := NamesAt(dfd)
	if err != nil {
		return fmt.Errorf("read %s: %w", dirName(prefix), err)
	}
	sort.Strings(names)
	for _, n := range names {
		rel := filepath.Join(prefix, n)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := fn(dfd, n, rel, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		sub, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", rel, err)
		}
		var now unix.Stat_t
		err = unix.Fstat(sub, &now)
		if err == nil && (now.Ino != st.Ino || now.Dev != st.Dev) {
			err = errors.New("replaced while it was walked")
		}
		if err == nil {
			err = walkAt(sub, rel, fn)
		} else {
			err = fmt.Errorf("%s: %w", rel, err)
		}
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

func dirName(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// NamesAt lists the entries of the open directory dfd.
func NamesAt(dfd int) ([]string, error) {
	dup, err := unix.Dup(dfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "dir")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// ChmodAt sets the mode of name in the open directory dfd without
// following a symlink there (then it fails with ELOOP). Kernels before
// fchmodat2 (6.6) get the same through an O_PATH descriptor.
func ChmodAt(dfd int, name string, mode uint32) error {
	err := unix.Fchmodat(dfd, name, mode&0o7777, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	return chmodAtPath(dfd, name, mode)
}

// chmodAtPath is ChmodAt through an O_PATH descriptor, which pins the
// entry itself, and /proc/self/fd, which names it without a lookup.
func chmodAtPath(dfd int, name string, mode uint32) error {
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("chmod %s: %w", name, unix.ELOOP)
	}
	if err := unix.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode&0o7777); err != nil {
		return fmt.Errorf("chmod %s: %w", name, err)
	}
	return nil
}

// ChownAt gives name in the open directory dfd to uid:gid; a symlink
// there is changed itself, never what it points to.
func ChownAt(dfd int, name string, uid, gid int) error {
	if err := unix.Fchownat(dfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("chown %s: %w", name, err)
	}
	return nil
}
