package backend

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// copyTree recreates src at dst (which must not exist): directories,
// symlinks and regular files with their modes and owners. Regular file
// content is produced by fileFn (a reflink or a byte copy).
//
// The server user runs every test's SQL, and SQL can run programs (COPY
// ... TO PROGRAM), so nothing it owns may be touched by root while it
// could change it: a dir handed over too early could have an entry
// swapped for a symlink to /etc/shadow before root chmods "its" file. So
// the whole tree is built root-owned first (dirs 0700), then modes and
// owners are set bottom-up with no-follow calls: an entry is handed over
// only once everything below it is final, while its parent is still
// root's and closed to everyone else.
func copyTree(src, dst string, fileFn func(src, dst *os.File) error) error {
	type final struct {
		path string
		st   unix.Stat_t
	}
	var made []final
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
		case unix.S_IFLNK:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := copyFile(p, target, fileFn); err != nil {
				return err
			}
		default:
			return nil // sockets, fifos: servers recreate them
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			if err := copyXattrs(p, target); err != nil {
				return err
			}
		}
		made = append(made, final{target, st})
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := finish(made[i].path, &made[i].st); err != nil {
			return err
		}
	}
	return nil
}

// finish gives one entry of a new clone its mode and owner without
// following a symlink: the mode first (root still owns it), then the owner.
// Set-id bits are never given: chown clears them, and a clone must not
// get them back even from a golden that has one (published before goldens
// were cleaned of them): a set-id file in a clone is a way out of the
// instance's uid for anyone whose SQL can run programs.
func finish(p string, st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := fsutil.ChmodNoFollow(p, cloneMode(st.Mode)); err != nil {
			return err
		}
	}
	return lchown(p, st)
}

// cloneMode is the mode a clone's entry gets for a golden entry of mode m:
// its permission bits (and a directory's sticky bit), no set-id bit.
func cloneMode(m uint32) uint32 {
	return m & 0o7777 &^ (unix.S_ISUID | unix.S_ISGID)
}

func copyFile(src, dst string, fileFn func(src, dst *os.File) error) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := fileFn(in, out); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", src, err)
	}
	return out.Close()
}

func lchown(p string, st *unix.Stat_t) error {
	if os.Geteuid() != 0 {
		return nil // only root can give files away; they are ours anyway
	}
	return os.Lchown(p, int(st.Uid), int(st.Gid))
}

// plainReader hides (*os.File).WriteTo so io.Copy cannot turn a plain copy
// into copy_file_range, which shares extents on XFS and btrfs.
type plainReader struct{ r io.Reader }

func (p plainReader) Read(b []byte) (int, error) { return p.r.Read(b) }

type plainWriter struct{ w io.Writer }

func (p plainWriter) Write(b []byte) (int, error) { return p.w.Write(b) }

// byteCopy copies the data of in to out, keeping holes: only the ranges
// SEEK_DATA finds are copied, and the size is set at the end.
func byteCopy(in, out *os.File) error {
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; {
		start, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if err != nil {
			if errors.Is(err, unix.ENXIO) {
				break // only a hole is left
			}
			if errors.Is(err, unix.EINVAL) {
				start = off // no SEEK_DATA here: copy everything
			} else {
				return err
			}
		}
		end, err := unix.Seek(int(in.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			end = size
		}
		if _, err := in.Seek(start, io.SeekStart); err != nil {
			return err
		}
		if _, err := out.Seek(start, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.CopyBuffer(plainWriter{out}, plainReader{io.LimitReader(in, end-start)}, buf); err != nil {
			return err
		}
		off = end
	}
	return out.Truncate(size)
}

func reflinkFile(in, out *os.File) error {
	return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
}

// copyXattrs copies the extended attributes of src to dst (no follow).
// Names the kernel refuses to set here (another filesystem's security
// labels, say) are skipped: the engines keep nothing they need in them.
func copyXattrs(src, dst string) error {
	return xattrsOf(src, func(name string, val []byte) error { return unix.Lsetxattr(dst, name, val, 0) })
}

// copyXattrsTo copies the extended attributes of src to the open file fd.
func copyXattrsTo(src string, fd int) error {
	return xattrsOf(src, func(name string, val []byte) error { return unix.Fsetxattr(fd, name, val, 0) })
}

// xattrsOf calls set for each extended attribute of src (no follow).
func xattrsOf(src string, set func(name string, val []byte) error) error {
	sz, err := unix.Llistxattr(src, nil)
	if err != nil || sz == 0 {
		return nil // no xattrs, or a filesystem without them
	}
	names := make([]byte, sz)
	if sz, err = unix.Llistxattr(src, names); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(names[:sz]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		vsz, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsz)
		if vsz, err = unix.Lgetxattr(src, name, val); err != nil {
			continue
		}
		if err := set(name, val[:vsz]); err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("copy xattr %s of %s: %w", name, src, err)
		}
	}
	return nil
}
