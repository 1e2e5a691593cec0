package instance

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/backend"
)

// PrewarmResult says what Prewarm read.
type PrewarmResult struct {
	Bytes    int64   `json:"bytes"`
	Files    int     `json:"files"`
	Ms       float64 `json:"ms"`
	CopiedUp bool    `json:"copied_up"`     // overlay: files were copied up (by reflink) first
	Cut      bool    `json:"cut,omitempty"` // stopped early: a client was waiting
}

// Prewarm reads every file of an instance's clone once, so its pages are
// in the page cache before a client sees it. Linux does not share cached
// pages between reflinked files, so a fresh reflink or snapshot clone
// otherwise serves its first reads through the filesystem (measured: ~42%
// of a plain copy's update throughput on a 1 GiB PostgreSQL golden). On
// backends that copy a file up on its first read-write open (OverlayFS),
// files are first opened read-write where that copy shares extents
// (backend.CheapCopyUp: an upper dir on XFS or btrfs), which makes it cheap now and
// the later read-write opens of the server free; on other upper
// filesystems copy-up would copy whole files, so files are only read
// (through the golden, whose cache all overlay clones share).
//
// hot lists files (relative to the data dir) to open read-write whatever
// the upper filesystem: the tables a recipe declares hot are then copied
// up here, in the pool, instead of on a test's first write to them.
//
// Warming is worth it only while nobody waits: reading a 1 GiB golden
// takes about a second of I/O per instance, and a pool whose clients
// churn through instances would hand each one out that much later. So
// once urgent (nil: never) reports a waiting client, Prewarm stops
// reading and only does the hot files' copy-ups, which a recipe asked
// for.
func Prewarm(ctx context.Context, st *State, hot []string, urgent func() bool) (*PrewarmResult, error) {
	if urgent == nil {
		urgent = func() bool { return false }
	}
	t0 := time.Now()
	w := &prewarmer{ctx: ctx, urgent: urgent, rw: map[string]bool{}, buf: make([]byte, 1<<20)}
	w.res.CopiedUp = backend.CheapCopyUp(st.cloneBackend(), st.Scratch)
	for _, h := range hot {
		w.rw[strings.TrimPrefix(filepath.Clean("/"+h), "/")] = true
	}
	// A clone mounted only in its server's namespace is read through it.
	data := st.Server.Outside(st.DataDir)
	fd, err := unix.Open(data, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: data, Err: err}
	}
	err = w.dir(fd, "")
	w.res.Ms = float64(time.Since(t0).Microseconds()) / 1000
	return &w.res, err
}

// prewarmer walks a clone the server user owns while that user (or a
// test's SQL running programs as it) may change it: every step is
// relative to a directory fd, never follows a symlink and never opens a
// device or fifo, so no swapped dir or planted link leads root's
// (possibly read-write) opens outside the clone.
type prewarmer struct {
	ctx    context.Context
	urgent func() bool
	rw     map[string]bool // hot files, relative to the data dir
	buf    []byte
	res    PrewarmResult
}

// dir reads the directory fd (rel from the data dir) and everything
// below it, in name order; it closes fd.
func (w *prewarmer) dir(fd int, rel string) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	// Names only: os.File.ReadDir would lstat by path where the
	// filesystem gives no entry types.
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil // removed by the server meanwhile
	}
	sort.Strings(names)
	for _, name := range names {
		if w.ctx.Err() != nil {
			return w.ctx.Err()
		}
		var sb unix.Stat_t
		if unix.Fstatat(fd, name, &sb, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		p := filepath.Join(rel, name)
		switch sb.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			// O_NOFOLLOW|O_DIRECTORY: a dir swapped for a symlink since
			// the stat fails to open instead of leading elsewhere.
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			if err := w.dir(sub, p); err != nil {
				return err
			}
		case unix.S_IFREG:
			w.file(fd, name, p)
		}
	}
	return nil
}

// file reads one regular file (name in the directory fd).
func (w *prewarmer) file(dirfd int, name, rel string) {
	if !w.res.Cut && w.urgent() {
		w.res.Cut = true
	}
	if w.res.Cut && !w.rw[rel] {
		return
	}
	flag := unix.O_RDONLY
	if w.res.CopiedUp || w.rw[rel] {
		flag = unix.O_RDWR
	}
	// O_NONBLOCK: a fifo put there since the listing cannot block us; the
	// fstat below then skips it.
	fd, err := unix.Openat(dirfd, name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	w.res.Files++
	for !w.res.Cut {
		n, err := f.Read(w.buf)
		w.res.Bytes += int64(n)
		if err != nil {
			break
		}
		w.res.Cut = w.urgent()
	}
}
