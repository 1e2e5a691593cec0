package backend

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// copyTree recreates src at dst (which must not exist): directories,
// symlinks and regular files with their modes, owners and xattrs. Regular
// file content is produced by fileFn (a reflink or a byte copy), which
// may run on several files at once. A clone (clone set) does not get the
// build's stamp marks (fsutil.StampedXattr); a copy of a golden keeps
// them.
//
// The server user runs every test's SQL, and SQL can run programs (COPY
// ... TO PROGRAM), so nothing it owns may be touched by root while it
// could change it: a dir handed over too early could have an entry
// swapped for a symlink to /etc/shadow before root chmods "its" file. So
// every dir is made root-only (0700) and everything is done through file
// descriptors: a file gets its mode and owner on the descriptor that
// created it, a dir once everything below it is final, while its parent
// is still root's and closed to everyone else. Below dst nothing is
// looked up by path (openat, mkdirat and symlinkat on open dirs, with
// O_NOFOLLOW).
//
// Directories are copied by up to copyWorkers goroutines: a clone of a
// golden with database slots has 11,000+ files, and FICLONE, create,
// fchmod and fchown cost ~30 µs each of them.
func copyTree(src, dst string, fileFn func(src, dst *os.File) error, clone bool) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer unix.Close(sfd)
	if err := unix.Mkdir(dst, 0o700); err != nil {
		return err
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	t := &treeCopy{fileFn: fileFn, clone: clone, tokens: make(chan struct{}, copyWorkers-1)}
	return t.dir(sfd, dfd, src, dst)
}

// copyWorkers bounds the goroutines of one copyTree.
var copyWorkers = max(2, min(4, runtime.NumCPU()))

type treeCopy struct {
	fileFn func(src, dst *os.File) error
	clone  bool          // leave the build's stamp marks out
	tokens chan struct{} // one per goroutine beyond the caller's
}

// dir copies the entries of the dir open at sfd (path sp) into the new,
// empty, root-only dir open at dfd (path dp), then gives dfd the mode,
// owner and xattrs of sfd.
func (t *treeCopy) dir(sfd, dfd int, sp, dp string) error {
	dup, err := unix.Dup(sfd) // an *os.File closes its descriptor
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(dup), sp)
	entries, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
	}
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	for _, e := range entries {
		if failed() {
			break
		}
		name := e.Name()
		switch e.Type() {
		case fs.ModeDir:
			csfd, cdfd, err := t.subdir(sfd, dfd, name, sp, dp)
			if err != nil {
				fail(err)
				continue
			}
			run := func() {
				defer unix.Close(csfd)
				defer unix.Close(cdfd)
				if err := t.dir(csfd, cdfd, filepath.Join(sp, name), filepath.Join(dp, name)); err != nil {
					fail(err)
				}
			}
			select {
			case t.tokens <- struct{}{}:
				wg.Add(1)
				go func() {
					defer func() { <-t.tokens; wg.Done() }()
					run()
				}()
			default:
				run()
			}
		case fs.ModeSymlink:
			if err := copySymlink(sfd, dfd, name, sp); err != nil {
				fail(err)
			}
		case 0:
			if err := t.file(sfd, dfd, name, sp, dp); err != nil {
				fail(err)
			}
		default:
			// sockets, fifos: servers recreate them
		}
	}
	wg.Wait()
	if first != nil {
		return first
	}
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	if err := copyXattrsFd(sfd, dfd, sp, t.clone); err != nil {
		return err
	}
	return finishFd(dfd, &st, dp, false)
}

// subdir makes the copy of sfd's dir name in dfd and opens both.
func (t *treeCopy) subdir(sfd, dfd int, name, sp, dp string) (int, int, error) {
	csfd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, fmt.Errorf("open %s: %w", filepath.Join(sp, name), err)
	}
	if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
		unix.Close(csfd)
		return -1, -1, fmt.Errorf("mkdir %s: %w", filepath.Join(dp, name), err)
	}
	cdfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(csfd)
		return -1, -1, fmt.Errorf("open %s: %w", filepath.Join(dp, name), err)
	}
	return csfd, cdfd, nil
}

// file copies the regular file name of sfd's dir into dfd's, with its
// xattrs, mode and owner, all on the descriptors.
func (t *treeCopy) file(sfd, dfd int, name, sp, dp string) error {
	in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(sp, name), err)
	}
	inf := os.NewFile(uintptr(in), filepath.Join(sp, name))
	defer inf.Close()
	var st unix.Stat_t
	if err := unix.Fstat(in, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%s changed while it was copied", inf.Name())
	}
	// Made with its final permission bits (root owns it, in a dir only
	// root can enter): unless the umask took some away, no chmod follows,
	// which was one more transaction per file. The new file's mode is
	// read back rather than foreseen from the umask, which is the
	// process's and changes for a moment elsewhere (serve's socket).
	want := cloneMode(st.Mode)
	out, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, want&0o777)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(dp, name), err)
	}
	var made unix.Stat_t
	if err := unix.Fstat(out, &made); err != nil {
		unix.Close(out)
		return err
	}
	outf := os.NewFile(uintptr(out), filepath.Join(dp, name))
	defer outf.Close()
	if err := t.fileFn(inf, outf); err != nil {
		return fmt.Errorf("%s: %w", inf.Name(), err)
	}
	if err := copyXattrsFd(in, out, inf.Name(), t.clone); err != nil {
		return err
	}
	if err := finishFd(out, &st, outf.Name(), made.Mode&0o7777 == want); err != nil {
		return err
	}
	return outf.Close()
}

// copySymlink copies the symlink name of sfd's dir into dfd's, with its
// owner (a symlink's mode means nothing on Linux).
func copySymlink(sfd, dfd int, name, sp string) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(sfd, name, buf)
	if err != nil {
		return fmt.Errorf("readlink %s: %w", filepath.Join(sp, name), err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Symlinkat(string(buf[:n]), dfd, name); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return unix.Fchownat(dfd, name, int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW)
}

// finishFd gives the new entry open at fd the mode and owner a golden
// entry with stat st gives a clone: the mode first (root still owns it),
// then the owner. Set-id bits are never given: chown clears them, and a
// clone must not get them back even from a golden that has one (published
// before goldens were cleaned of them): a set-id file in a clone is a way
// out of the instance's uid for anyone whose SQL can run programs.
// modeRight: the entry was made with that mode already.
func finishFd(fd int, st *unix.Stat_t, p string, modeRight bool) error {
	if !modeRight {
		if err := unix.Fchmod(fd, cloneMode(st.Mode)); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil // only root can give files away; they are ours anyway
	}
	if err := unix.Fchown(fd, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("chown %s: %w", p, err)
	}
	return nil
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

// copyXattrsFd copies the extended attributes of the file open at in to
// the one open at out (p names in in errors); for a clone, not the
// build's stamp marks.
func copyXattrsFd(in, out int, p string, clone bool) error {
	return copyXattrs(p, clone,
		func(b []byte) (int, error) { return unix.Flistxattr(in, b) },
		func(name string, b []byte) (int, error) { return unix.Fgetxattr(in, name, b) },
		func(name string, val []byte) error { return unix.Fsetxattr(out, name, val, 0) })
}

// copyXattrsTo copies the extended attributes of src (no follow) to the
// open file fd of a clone (not the build's stamp marks).
func copyXattrsTo(src string, fd int) error {
	return copyXattrs(src, true,
		func(b []byte) (int, error) { return unix.Llistxattr(src, b) },
		func(name string, b []byte) (int, error) { return unix.Lgetxattr(src, name, b) },
		func(name string, val []byte) error { return unix.Fsetxattr(fd, name, val, 0) })
}

// copyXattrs calls set for each extended attribute of p that list names
// and get reads, but for a clone the build's stamp marks. Names the
// kernel refuses to set here (another filesystem's security labels, say)
// are skipped: the engines keep nothing they need in them.
func copyXattrs(p string, clone bool, list func([]byte) (int, error), get func(string, []byte) (int, error), set func(string, []byte) error) error {
	sz, err := list(nil)
	if err != nil || sz == 0 {
		return nil // no xattrs, or a filesystem without them
	}
	names := make([]byte, sz)
	if sz, err = list(names); err != nil {
		return nil
	}
	for _, name := range strings.Split(strings.TrimRight(string(names[:sz]), "\x00"), "\x00") {
		if name == "" || clone && name == fsutil.StampedXattr {
			continue
		}
		vsz, err := get(name, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsz)
		if vsz, err = get(name, val); err != nil {
			continue
		}
		if err := set(name, val[:vsz]); err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("copy xattr %s of %s: %w", name, p, err)
		}
	}
	return nil
}
