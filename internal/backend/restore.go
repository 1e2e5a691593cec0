package backend

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Restorer is implemented by backends whose clone is a plain tree made
// file by file from the golden (reflink, btrfs, copy). A used clone goes
// back to the golden's content by redoing only what the server changed:
// files it wrote are made again from the golden, files it created are
// removed, files it removed come back. A server touches a few dozen of a
// clone's thousand-odd files, so this costs milliseconds where a new
// clone costs a walk of the whole golden (issue 17: reset in place).
//
// Restore must only run while nothing else can change the clone: the
// server is stopped and every process that could write there has ended
// (the instance's own uid, or the caller itself when it runs unprivileged).
type Restorer interface {
	Restore(ctx context.Context, golden, clone string, marks *Marks) (Restored, error)
}

// Restored says what a Restore redid.
type Restored struct {
	Files   int   // regular files made again from the golden
	Bytes   int64 // their size
	Removed int   // entries the golden does not have, removed
}

// Marks identify each regular file of a clone as it was when the clone
// was made: inode, size and change time. Any write, truncate, chmod,
// chown or replacement moves the change time (which no unprivileged call
// can set back) or the inode, so a file whose mark still matches holds the
// golden's bytes. The clone is marked before its server first starts: the
// server's first write comes tens of milliseconds later, well past the
// timestamp granularity.
type Marks struct {
	Files map[string]Mark // by path relative to the clone
}

// Mark is one file's identity.
type Mark struct {
	Ino   uint64
	Size  int64
	Ctime int64 // ns
}

func markOf(st *unix.Stat_t) Mark {
	return Mark{Ino: st.Ino, Size: st.Size, Ctime: st.Ctim.Nano()}
}

// MarkClone records the marks of every regular file under clone.
func MarkClone(clone string) (*Marks, error) {
	m := &Marks{Files: map[string]Mark{}}
	err := filepath.WalkDir(clone, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		rel, _ := filepath.Rel(clone, p)
		m.Files[rel] = markOf(&st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mark clone: %w", err)
	}
	return m, nil
}

// Save writes the marks to path (atomically).
func (m *Marks) Save(path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if err := gob.NewEncoder(f).Encode(m); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LoadMarks reads marks saved by Save.
func LoadMarks(path string) (*Marks, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := &Marks{}
	if err := gob.NewDecoder(f).Decode(m); err != nil {
		return nil, fmt.Errorf("read clone marks %s: %w", path, err)
	}
	return m, nil
}

func (Reflink) Restore(ctx context.Context, golden, clone string, m *Marks) (Restored, error) {
	return restoreTree(ctx, golden, clone, m, reflinkFile)
}

func (Btrfs) Restore(ctx context.Context, golden, clone string, m *Marks) (Restored, error) {
	return restoreTree(ctx, golden, clone, m, reflinkFile) // btrfs shares extents file by file too
}

func (Copy) Restore(ctx context.Context, golden, clone string, m *Marks) (Restored, error) {
	return restoreTree(ctx, golden, clone, m, byteCopy)
}

// restorer is one restoreTree under way.
type restorer struct {
	ctx           context.Context
	golden, clone string
	old, next     map[string]Mark
	fileFn        func(src, dst *os.File) error
	did           Restored
}

// restoreTree walks golden and clone side by side, top down, and makes
// clone equal to golden. On success m holds the marks of the restored
// clone. Directories are checked to be directories (never followed
// through a symlink) before anything below them is touched.
func restoreTree(ctx context.Context, golden, clone string, m *Marks, fileFn func(src, dst *os.File) error) (Restored, error) {
	var st unix.Stat_t
	if err := unix.Lstat(clone, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return Restored{}, fmt.Errorf("restore clone: %s is not a directory", clone)
	}
	r := &restorer{ctx: ctx, golden: golden, clone: clone, old: m.Files, next: map[string]Mark{}, fileFn: fileFn}
	if err := r.dir("."); err != nil {
		return r.did, fmt.Errorf("restore clone %s: %w", filepath.Base(clone), err)
	}
	m.Files = r.next
	return r.did, nil
}

// dir makes the clone's directory rel hold what the golden's does.
func (r *restorer) dir(rel string) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	gents, err := os.ReadDir(filepath.Join(r.golden, rel))
	if err != nil {
		return err
	}
	// Entries are looked at relative to the open clone dir: one name to
	// resolve per entry, not the whole path.
	cdir, err := os.Open(filepath.Join(r.clone, rel))
	if err != nil {
		return err
	}
	defer cdir.Close()
	cents, err := cdir.ReadDir(-1)
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(gents))
	for _, e := range gents {
		want[e.Name()] = true
	}
	for _, e := range cents {
		if !want[e.Name()] {
			if err := fsutil.RemoveAll(filepath.Join(r.clone, rel, e.Name())); err != nil {
				return err
			}
			r.did.Removed++
		}
	}
	for _, e := range gents {
		if err := r.entry(int(cdir.Fd()), rel, e.Name(), e.Type()); err != nil {
			return err
		}
	}
	return nil
}

// entry makes the clone's rel equal to the golden's, whose kind the
// golden's directory listing gave. A regular file whose mark still
// matches is the golden's: the golden's own file is not even looked at.
func (r *restorer) entry(cdir int, parent, name string, kind fs.FileMode) error {
	rel := filepath.Join(parent, name)
	gp, cp := filepath.Join(r.golden, rel), filepath.Join(r.clone, rel)
	if kind != 0 && kind != fs.ModeDir && kind != fs.ModeSymlink {
		return nil // sockets, fifos: clones never get them
	}
	var c unix.Stat_t
	err := unix.Fstatat(cdir, name, &c, unix.AT_SYMLINK_NOFOLLOW)
	missing := errors.Is(err, unix.ENOENT)
	if err != nil && !missing {
		return err
	}
	if !missing && kind == 0 && c.Mode&unix.S_IFMT == unix.S_IFREG {
		if old, ok := r.old[rel]; ok && old == markOf(&c) {
			r.next[rel] = old
			return nil
		}
	}
	var g unix.Stat_t
	if err := unix.Lstat(gp, &g); err != nil {
		return err
	}
	if !missing && c.Mode&unix.S_IFMT != g.Mode&unix.S_IFMT {
		if err := fsutil.RemoveAll(cp); err != nil {
			return err
		}
		r.did.Removed++
		missing = true
	}
	switch g.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if missing {
			return r.subtree(gp, cp, rel)
		}
		if err := r.dir(rel); err != nil {
			return err
		}
		if c.Mode != g.Mode || c.Uid != g.Uid || c.Gid != g.Gid {
			return finish(cp, &g)
		}
		return nil
	case unix.S_IFLNK:
		if !missing {
			if link, err := os.Readlink(cp); err == nil && link == readlinkOr(gp) {
				return nil
			}
			if err := os.Remove(cp); err != nil {
				return err
			}
		}
		link, err := os.Readlink(gp)
		if err != nil {
			return err
		}
		if err := os.Symlink(link, cp); err != nil {
			return err
		}
		return lchown(cp, &g)
	case unix.S_IFREG:
		if !missing {
			if err := os.Remove(cp); err != nil {
				return err
			}
		}
		return r.file(gp, cp, rel, &g)
	}
	return nil
}

// file makes the clone's regular file rel again from the golden's.
func (r *restorer) file(gp, cp, rel string, g *unix.Stat_t) error {
	if err := copyFile(gp, cp, r.fileFn); err != nil {
		return err
	}
	if err := copyXattrs(gp, cp); err != nil {
		return err
	}
	if err := finish(cp, g); err != nil {
		return err
	}
	var c unix.Stat_t
	if err := unix.Lstat(cp, &c); err != nil {
		return err
	}
	r.next[rel] = markOf(&c)
	r.did.Files++
	r.did.Bytes += g.Size
	return nil
}

// subtree makes a directory the clone lost, with everything below it.
func (r *restorer) subtree(gp, cp, rel string) error {
	if err := copyTree(gp, cp, r.fileFn); err != nil {
		return err
	}
	sub, err := MarkClone(cp)
	if err != nil {
		return err
	}
	for p, m := range sub.Files {
		r.next[filepath.Join(rel, p)] = m
		r.did.Files++
		r.did.Bytes += m.Size
	}
	return nil
}

func readlinkOr(p string) string {
	s, _ := os.Readlink(p)
	return s
}
