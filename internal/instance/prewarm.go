package instance

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

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
	res := &PrewarmResult{}
	res.CopiedUp = backend.CheapCopyUp(st.Backend, st.Scratch)
	// A clone mounted only in its server's namespace is read through it.
	data := st.Server.Outside(st.DataDir)
	rw := map[string]bool{}
	for _, h := range hot {
		rw[filepath.Join(data, filepath.Clean("/"+h))] = true
	}
	buf := make([]byte, 1<<20)
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file the server removed meanwhile
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if !res.Cut && urgent() {
			res.Cut = true
		}
		if res.Cut && !rw[p] {
			return nil
		}
		flag := os.O_RDONLY
		if res.CopiedUp || rw[p] {
			flag = os.O_RDWR
		}
		// The clone is the server user's, and a test's SQL can run programs
		// as that user: never follow a symlink it planted, never open a
		// device or fifo it put there (O_NONBLOCK: a fifo cannot block us).
		f, err := os.OpenFile(p, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil
		}
		defer f.Close()
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		res.Files++
		for !res.Cut {
			n, err := f.Read(buf)
			res.Bytes += int64(n)
			if err != nil {
				break
			}
			res.Cut = urgent()
		}
		return nil
	})
	res.Ms = float64(time.Since(t0).Microseconds()) / 1000
	return res, err
}
