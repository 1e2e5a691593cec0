package backend

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// copyTree recreates src at dst (which must not exist): directories,
// symlinks and regular files with their modes and owners. Regular file
// content is produced by fileFn (a reflink or a byte copy).
func copyTree(src, dst string, fileFn func(src, dst *os.File) error) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		mode := os.FileMode(st.Mode & 0o7777)
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
			return lchown(target, &st)
		case unix.S_IFREG:
			if err := copyFile(p, target, fileFn); err != nil {
				return err
			}
		default:
			return nil // sockets, fifos: servers recreate them
		}
		if err := lchown(target, &st); err != nil {
			return err
		}
		return os.Chmod(target, mode)
	})
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

func byteCopy(in, out *os.File) error {
	buf := make([]byte, 1<<20)
	_, err := io.CopyBuffer(plainWriter{out}, plainReader{in}, buf)
	return err
}

func reflinkFile(in, out *os.File) error {
	return unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
}
