package fsutil

import (
	"fmt"
	"io/fs"
	"path"

	"golang.org/x/sys/unix"
)

// DirFDs opens the directories below a root one component at a time,
// each relative to its parent's descriptor and without following a
// symlink, and keeps them open: a check that stats many files of one
// tree by name then walks no path from / for each (a stat by full path of
// the ~1,000 files of a server build walked 8 components each: 6 µs a
// file, where one relative to its open directory takes ~1.5 µs).
type DirFDs struct {
	fds map[string]int // "." is the root
}

// OpenDirs opens root (a symlink there is refused).
func OpenDirs(root string) (*DirFDs, error) {
	fd, err := OpenDirNoFollow(root)
	if err != nil {
		return nil, err
	}
	return &DirFDs{fds: map[string]int{".": fd}}, nil
}

// Dir is the descriptor of the directory rel (slash-separated, relative
// to the root, clean; "." for the root), opened on first use. A path
// that is not of that form (absolute, with "..") is refused.
func (d *DirFDs) Dir(rel string) (int, error) {
	if fd, ok := d.fds[rel]; ok {
		return fd, nil
	}
	if !fs.ValidPath(rel) {
		return -1, fmt.Errorf("%s: not a path inside the tree", rel)
	}
	parent, err := d.Dir(path.Dir(rel))
	if err != nil {
		return -1, err
	}
	fd, err := unix.Openat(parent, path.Base(rel), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", rel, err)
	}
	d.fds[rel] = fd
	return fd, nil
}

// Lstat stats rel (a file or directory below the root, not the root)
// relative to its open parent, without following a symlink at rel.
func (d *DirFDs) Lstat(rel string, st *unix.Stat_t) error {
	if rel == "." || !fs.ValidPath(rel) {
		return fmt.Errorf("%s: not a path inside the tree", rel)
	}
	parent, err := d.Dir(path.Dir(rel))
	if err != nil {
		return err
	}
	return unix.Fstatat(parent, path.Base(rel), st, unix.AT_SYMLINK_NOFOLLOW)
}

// Close closes every descriptor.
func (d *DirFDs) Close() {
	for _, fd := range d.fds {
		unix.Close(fd)
	}
	d.fds = nil
}

// FileMode is a stat mode as Go's fs.FileMode (what os.Lstat reports).
func FileMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
