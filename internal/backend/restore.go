package backend

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

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
// server's first write comes tens of milliseconds later (PostgreSQL and
// MariaDB take 20 ms and more to start), past the kernel's timestamp
// granularity (one timer tick, 1–10 ms; from Linux 6.13 on, any change
// after a stat gets a newer ctime anyway).
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

// marksMagic opens a marks file in the format Save writes: after it, the
// number of files, then per file its path, inode, size and change time,
// as varints (a path as its length and bytes). encoding/gob took a tenth
// of a busy daemon's CPU writing the 11,000 marks of a slot golden's clone
// after every restore; this format is a loop over the map.
const marksMagic = "dbfork-marks-1\n"

// Save writes the marks to path (atomically).
func (m *Marks) Save(path string) error {
	b := make([]byte, 0, len(marksMagic)+binary.MaxVarintLen64+len(m.Files)*64)
	b = append(b, marksMagic...)
	b = binary.AppendUvarint(b, uint64(len(m.Files)))
	for p, mk := range m.Files {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendUvarint(b, mk.Ino)
		b = binary.AppendVarint(b, mk.Size)
		b = binary.AppendVarint(b, mk.Ctime)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("save clone marks: %w", err)
	}
	return os.Rename(tmp, path)
}

// LoadMarks reads marks saved by Save (or, from a dbfork before this
// format, by encoding/gob).
func LoadMarks(path string) (*Marks, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(marksMagic)) {
		m := &Marks{}
		if err := gob.NewDecoder(bytes.NewReader(data)).Decode(m); err != nil {
			return nil, fmt.Errorf("read clone marks %s: %w", path, err)
		}
		return m, nil
	}
	m, err := decodeMarks(data[len(marksMagic):])
	if err != nil {
		return nil, fmt.Errorf("read clone marks %s: %w", path, err)
	}
	return m, nil
}

// decodeMarks reads what Save wrote after the magic.
func decodeMarks(b []byte) (*Marks, error) {
	bad := errors.New("truncated or damaged")
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	sv := func() int64 { // binary.Varint's zig-zag, over uv
		u := uv()
		if u&1 != 0 {
			return ^int64(u >> 1)
		}
		return int64(u >> 1)
	}
	count := uv()
	if b == nil || count > uint64(len(b)) {
		return nil, bad
	}
	m := &Marks{Files: make(map[string]Mark, count)}
	for i := uint64(0); i < count; i++ {
		l := uv()
		if b == nil || l > uint64(len(b)) {
			return nil, bad
		}
		p := string(b[:l])
		b = b[l:]
		mk := Mark{Ino: uv(), Size: sv(), Ctime: sv()}
		if b == nil {
			return nil, bad
		}
		m.Files[p] = mk
	}
	if len(b) != 0 {
		return nil, bad
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
	// marks are the clone's marks, brought up to date in place as the
	// walk redoes files: a mark still right stays as it is (a walk that
	// changes nothing writes nothing). A restore that fails leaves them
	// half updated; the caller drops them then (the clone is cloned anew).
	marks  map[string]Mark
	key    []byte // the path of the entry being looked at
	fileFn func(src, dst *os.File) error
	did    Restored
	tmp    string // a root-only dir in the clone's root for lost subtrees ("" until needed)
	rootfd int
}

// restoreTree walks golden and clone side by side, top down, and makes
// clone equal to golden. On success m holds the marks of the restored
// clone.
//
// Everything on the clone's side goes through directory descriptors,
// opened without following symlinks, never through paths: a name a
// server user swaps for a symlink makes the walk fail, it cannot lead
// root elsewhere. As root, the clone's root is root's alone (0700) from
// the start; the caller gives it back (handOver).
func restoreTree(ctx context.Context, golden, clone string, m *Marks, fileFn func(src, dst *os.File) error) (Restored, error) {
	fd, err := unix.Open(clone, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Restored{}, fmt.Errorf("restore clone: open %s: %w", clone, err)
	}
	defer unix.Close(fd)
	if os.Geteuid() == 0 {
		if err := unix.Fchown(fd, 0, 0); err != nil {
			return Restored{}, fmt.Errorf("restore clone: take %s back: %w", clone, err)
		}
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return Restored{}, fmt.Errorf("restore clone: take %s back: %w", clone, err)
		}
	}
	if m.Files == nil {
		m.Files = map[string]Mark{}
	}
	r := &restorer{ctx: ctx, golden: filepath.Clean(golden), clone: clone, marks: m.Files, fileFn: fileFn, rootfd: fd}
	err = r.dir(fd, ".")
	if r.tmp != "" {
		if rerr := removeAt(fd, filepath.Base(r.tmp)); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil {
		return r.did, fmt.Errorf("restore clone %s: %w", filepath.Base(clone), err)
	}
	return r.did, nil
}

// dir makes the clone's directory rel (open at dfd) hold what the
// golden's does.
func (r *restorer) dir(dfd int, rel string) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	gents, err := os.ReadDir(filepath.Join(r.golden, rel))
	if err != nil {
		return err
	}
	names, err := fsutil.NamesAt(dfd)
	if err != nil {
		return err
	}
	want := make(map[string]bool, len(gents))
	for _, e := range gents {
		want[e.Name()] = true
	}
	for _, n := range names {
		if !want[n] {
			if err := removeAt(dfd, n); err != nil {
				return err
			}
			r.did.Removed++
		}
	}
	for _, e := range gents {
		if err := r.entry(dfd, rel, e.Name(), e.Type()); err != nil {
			return err
		}
	}
	return nil
}

// entry makes the clone's rel/name equal to the golden's, whose kind the
// golden's directory listing gave. A regular file whose mark still
// matches is the golden's: the golden's own file is not even looked at.
func (r *restorer) entry(dfd int, parent, name string, kind fs.FileMode) error {
	if kind != 0 && kind != fs.ModeDir && kind != fs.ModeSymlink {
		return nil // sockets, fifos: clones never get them
	}
	// rel as filepath.Rel gave it to MarkClone: parent is "." or clean,
	// and a directory entry's name has no slash. Joined by hand: most
	// entries stop at the mark check, a clone of a golden with slots has
	// 11,000 of them, and Join's Clean was a tenth of the walk.
	// The mark is looked up with the path built in a buffer: no string
	// is made for a file that is unchanged.
	key := r.key[:0]
	if parent != "." {
		key = append(append(key, parent...), '/')
	}
	key = append(key, name...)
	r.key = key
	var c unix.Stat_t
	err := unix.Fstatat(dfd, name, &c, unix.AT_SYMLINK_NOFOLLOW)
	missing := errors.Is(err, unix.ENOENT)
	if err != nil && !missing {
		return err
	}
	if !missing && kind == 0 && c.Mode&unix.S_IFMT == unix.S_IFREG {
		if old, ok := r.marks[string(key)]; ok && old == markOf(&c) {
			return nil
		}
	}
	rel := string(key)
	gp := r.golden + "/" + rel
	var g unix.Stat_t
	if err := unix.Lstat(gp, &g); err != nil {
		return err
	}
	if !missing && (c.Mode&unix.S_IFMT != g.Mode&unix.S_IFMT || c.Mode&unix.S_IFMT == unix.S_IFREG) {
		if err := removeAt(dfd, name); err != nil {
			return err
		}
		if c.Mode&unix.S_IFMT != g.Mode&unix.S_IFMT {
			r.did.Removed++
		}
		missing = true
	}
	switch g.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		if missing {
			return r.subtree(dfd, name, gp, rel)
		}
		return r.subdir(dfd, name, rel, &g)
	case unix.S_IFLNK:
		link, err := os.Readlink(gp)
		if err != nil {
			return err
		}
		if !missing {
			if cur, err := readlinkAt(dfd, name); err == nil && cur == link {
				return nil
			}
			if err := unix.Unlinkat(dfd, name, 0); err != nil {
				return err
			}
		}
		if err := unix.Symlinkat(link, dfd, name); err != nil {
			return err
		}
		if os.Geteuid() == 0 {
			return unix.Fchownat(dfd, name, int(g.Uid), int(g.Gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		return nil
	case unix.S_IFREG:
		return r.file(dfd, name, gp, rel, &g)
	}
	return nil
}

// subdir walks into the clone's existing directory name and gives it the
// golden's mode and owner.
func (r *restorer) subdir(dfd int, name, rel string, g *unix.Stat_t) error {
	sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", rel, err)
	}
	defer unix.Close(sub)
	if err := sameFS(dfd, sub, rel); err != nil {
		return err
	}
	if err := r.dir(sub, rel); err != nil {
		return err
	}
	var c unix.Stat_t
	if err := unix.Fstat(sub, &c); err != nil {
		return err
	}
	if c.Mode&0o7777 != cloneMode(g.Mode) || c.Uid != g.Uid || c.Gid != g.Gid {
		return setModeOwner(sub, g)
	}
	return nil
}

// file makes the clone's regular file name (in dfd) again from the
// golden's gp.
func (r *restorer) file(dfd int, name, gp, rel string, g *unix.Stat_t) error {
	in, err := os.Open(gp)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", rel, err)
	}
	out := os.NewFile(uintptr(fd), name)
	defer out.Close()
	if err := r.fileFn(in, out); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	if err := copyXattrsTo(gp, fd); err != nil {
		return err
	}
	if err := setModeOwner(fd, g); err != nil {
		return err
	}
	var c unix.Stat_t
	if err := unix.Fstat(fd, &c); err != nil {
		return err
	}
	r.marks[rel] = markOf(&c)
	r.did.Files++
	r.did.Bytes += g.Size
	return nil
}

// subtree makes a directory the clone lost, with everything below it: it
// is built in a root-only dir in the clone's root (same filesystem, same
// btrfs subvolume) and renamed into place.
func (r *restorer) subtree(dfd int, name, gp, rel string) error {
	if r.tmp == "" {
		tmp := ".dbfork-restore"
		if err := unix.Mkdirat(r.rootfd, tmp, 0o700); err != nil {
			return fmt.Errorf("restore %s: %w", rel, err)
		}
		r.tmp = filepath.Join(r.clone, tmp)
	}
	built := filepath.Join(r.tmp, strconv.Itoa(r.did.Files+r.did.Removed))
	if err := copyTree(gp, built, r.fileFn, true); err != nil {
		return err
	}
	sub, err := MarkClone(built)
	if err != nil {
		return err
	}
	if err := unix.Renameat(unix.AT_FDCWD, built, dfd, name); err != nil {
		return fmt.Errorf("restore %s: %w", rel, err)
	}
	for p, m := range sub.Files {
		r.marks[filepath.Join(rel, p)] = m
		r.did.Files++
		r.did.Bytes += m.Size
	}
	return nil
}
