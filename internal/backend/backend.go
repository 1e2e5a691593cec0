// Package backend makes writable copy-on-write clones of golden data
// directories. Each way of doing it (btrfs snapshot, reflink, OverlayFS,
// plain copy) is a Backend; Select probes which of them really work for a
// store and picks the one whose clones are cheapest to write to.
package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/proc"
)

// Backend is one way to clone a golden data directory.
//
// Checklist for an implementation (the shared suite in backendtest checks
// each point):
//   - Probe really tries the operation in a scratch dir below dir and
//     returns an error that says how to make it work when it cannot.
//   - Prepare creates clone (which must not exist) as a writable view of
//     golden with the same content, modes and owners; writes to the clone
//     never reach golden. scratch is a private directory Prepare may use
//     (OverlayFS upper and work dirs).
//   - Remove undoes Prepare from the paths alone, so that it works after a
//     crash; it is idempotent and never deletes through a mount.
type Backend interface {
	Name() string
	Probe(ctx context.Context, dir string) error
	Prepare(ctx context.Context, golden, clone, scratch string) error
	Remove(ctx context.Context, clone, scratch string) error
}

// Diverger is implemented by backends whose clone keeps what it owns
// apart from what it shares (OverlayFS: the upper dir holds every file
// copied up or new). Others own exactly the clone's extents that no longer
// match the golden's.
type Diverger interface {
	// OwnedDir is the dir, laid out like the clone, holding the files the
	// clone owns in full.
	OwnedDir(clone, scratch string) string
}

// CopyUpper is implemented by backends that copy a file on its first
// read-write open. CheapCopyUp says whether that copy shares extents
// (cheap to do ahead of time, in a pool) for a clone with this scratch dir.
type CopyUpper interface {
	CheapCopyUp(scratch string) bool
}

// Owned is the dir holding what a clone of backend name owns: OwnedDir
// where the backend keeps it apart, else the clone itself.
func Owned(name, clone, scratch string) (dir string, apart bool) {
	if b, err := Get(name); err == nil {
		if d, ok := b.(Diverger); ok {
			return d.OwnedDir(clone, scratch), true
		}
	}
	return clone, false
}

// CopiesUp reports whether clones of backend name copy a file on its
// first read-write open (OverlayFS), cheaply or not.
func CopiesUp(name string) bool {
	b, err := Get(name)
	if err != nil {
		return false
	}
	_, ok := b.(CopyUpper)
	return ok
}

// CheapCopyUp reports whether clones of backend name copy files on their
// first read-write open, cheaply (false when they do not copy at all).
func CheapCopyUp(name, scratch string) bool {
	if b, err := Get(name); err == nil {
		if c, ok := b.(CopyUpper); ok {
			return c.CheapCopyUp(scratch)
		}
	}
	return false
}

// FullCopier is implemented by backends whose clones copy the golden's
// data in full (their cost grows with the golden; nothing is shared).
type FullCopier interface {
	CopiesAll()
}

// SharesData reports whether clones of backend name share the golden's
// data (every backend but a full copy): making one ahead of need costs
// little disk.
func SharesData(name string) bool {
	b, err := Get(name)
	if err != nil {
		return false
	}
	_, full := b.(FullCopier)
	return !full
}

// GoldenChecker is implemented by backends that can clone only some
// goldens (btrfs needs the golden to be a subvolume).
type GoldenChecker interface {
	CanClone(golden string) error
}

// Names lists the backends in the order auto prefers them: cheap first
// writes first, plain copy last — except that where reflink works and
// OverlayFS does too, auto takes OverlayFS (see Select).
var Names = []string{"btrfs", "reflink", "overlay", "userns-overlay", "copy"}

// Get returns a backend by name.
func Get(name string) (Backend, error) {
	switch name {
	case "btrfs":
		return Btrfs{}, nil
	case "reflink":
		return Reflink{}, nil
	case "overlay":
		return Overlay{}, nil
	case "userns-overlay":
		return UsernsOverlay{}, nil
	case "copy":
		return Copy{}, nil
	}
	return nil, errs.Invalid("unknown backend %q (use auto, %s)", name, strings.Join(Names, ", "))
}

// Why says, for the user, what choosing a backend means.
func Why(name string) string {
	switch name {
	case "btrfs":
		return "the store is on btrfs: a subvolume snapshot is O(1) and first writes copy only the blocks written"
	case "reflink":
		return "the store filesystem shares extents (FICLONE): files are cloned, first writes copy only the blocks written"
	case "overlay":
		return "kernel OverlayFS works here: one mount per clone, but a file is copied whole on its first read-write open"
	case "userns-overlay":
		return "OverlayFS without root, mounted in the server's own user namespace: one mount per clone, but a file is copied whole on its first read-write open"
	case "copy":
		return "a full byte copy of the golden per clone: slow and big, the last resort (`dbfork doctor` says how to get copy-on-write)"
	}
	return ""
}

const whyOverlayReflink = "OverlayFS on a filesystem that shares extents: one mount per clone, and files are copied up by reflink, so first writes copy only metadata"

// Probe is one backend's verdict for a store.
type Probe struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// ProbeAll tries every backend for dir.
func ProbeAll(ctx context.Context, dir string) []Probe {
	var out []Probe
	for _, n := range Names {
		b, _ := Get(n)
		p := Probe{Name: n, OK: true}
		if err := b.Probe(ctx, dir); err != nil {
			p.OK, p.Error = false, err.Error()
		}
		out = append(out, p)
	}
	return out
}

// Select resolves a backend name ("auto" or one of Names) for cloning
// golden in the store at dir and says why it was chosen.
func Select(ctx context.Context, name, dir, golden string) (Backend, string, error) {
	if name != "" && name != "auto" {
		b, err := Get(name)
		if err != nil {
			return nil, "", err
		}
		if err := usable(ctx, b, dir, golden); err != nil {
			return nil, "", errs.Unsupported("backend %s does not work here: %v", name, err)
		}
		return b, "requested with --backend", nil
	}
	var skipped []string
	for _, n := range Names {
		b, _ := Get(n)
		if err := usable(ctx, b, dir, golden); err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", n, err))
			continue
		}
		if n == "reflink" {
			// Where files can be reflinked, OverlayFS copies up by reflink
			// too: its first writes are as cheap, and a clone is one mount
			// instead of one FICLONE per file (measured on a 1 GiB
			// PostgreSQL golden on XFS: ready in 57 ms vs 128 ms). Not
			// userns-overlay: without root, reflink clones need no user
			// namespace (which AppArmor may block), no server living in
			// one, and keep the data dir on the reflink filesystem itself,
			// where PostgreSQL 18 clones databases in the server.
			if ob, _ := Get("overlay"); usable(ctx, ob, dir, golden) == nil {
				return ob, whyOverlayReflink, nil
			}
		}
		return b, Why(n), nil
	}
	return nil, "", errs.Unsupported("no backend works for %s: %s", dir, strings.Join(skipped, "; "))
}

// probeTTL is how long a successful probe is trusted in this process: a
// pool starting instances back to back need not mount a test overlay
// before every one, but a long-running daemon re-checks now and then.
const probeTTL = 30 * time.Second

var probed sync.Map // dir + "\x00" + backend name -> time.Time of the last success

func usable(ctx context.Context, b Backend, dir, golden string) error {
	k := dir + "\x00" + b.Name()
	if t, ok := probed.Load(k); !ok || time.Since(t.(time.Time)) > probeTTL {
		if err := b.Probe(ctx, dir); err != nil {
			probed.Delete(k)
			return err
		}
		probed.Store(k, time.Now())
	}
	if gc, ok := b.(GoldenChecker); ok && golden != "" {
		return gc.CanClone(golden)
	}
	return nil
}

// probePrefix starts the names of probe scratch dirs; the prober's PID
// and start time follow, so gc can tell a crashed prober's leftovers from
// a probe running right now.
const probePrefix = ".probe-"

// probeDir makes a scratch dir below dir for a probe and returns a cleanup.
func probeDir(dir, name string) (string, func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	me, err := proc.Of(os.Getpid())
	if err != nil {
		return "", nil, err
	}
	p, err := os.MkdirTemp(dir, fmt.Sprintf("%s%s-%d-%d-", probePrefix, name, me.PID, me.StartTime))
	if err != nil {
		return "", nil, err
	}
	return p, func() {
		_ = fsutil.UnmountAllUnder(p)
		_ = fsutil.RemoveAll(p)
	}, nil
}

// ReapProbes removes probe scratch dirs below dir whose prober died (a
// crash mid-probe can leave one, even with an overlay mounted in it) and
// returns their paths.
func ReapProbes(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), probePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		parts := strings.Split(rest, "-") // name, pid, start time, random
		if len(parts) != 4 {
			continue
		}
		pid, err1 := strconv.Atoi(parts[1])
		start, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || (proc.Identity{PID: pid, StartTime: start}).Alive() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if fsutil.UnmountAllUnder(p) == nil && fsutil.RemoveAll(p) == nil {
			out = append(out, p)
		}
	}
	return out
}

// NewDataDir creates the directory a golden is built in: a btrfs subvolume
// where the store is on btrfs (so it can be snapshotted), else a plain dir.
func NewDataDir(path string) error {
	if fs, err := fsutil.FSType(filepath.Dir(path)); err == nil && fs == "btrfs" {
		if err := createSubvolume(path); err == nil {
			return os.Chmod(path, 0o700)
		}
	}
	return os.Mkdir(path, 0o700)
}

// FreezeDataDir makes a finished golden's data dir refuse writes where the
// filesystem can do that without hurting clones: a btrfs subvolume becomes
// read-only (snapshots of it stay writable). Elsewhere it does nothing:
// OverlayFS refuses writes to lower files that are immutable (chattr +i),
// and read-only modes would be copied into every clone; there the golden
// is kept out of reach by its root-only directory (see golden.Build).
func FreezeDataDir(path string) error {
	if !isSubvolume(path) {
		return nil
	}
	return setSubvolumeReadOnly(path, true)
}

// RemoveDataDir deletes a data dir made by NewDataDir or by a backend.
func RemoveDataDir(path string) error {
	if isSubvolume(path) {
		if err := deleteSubvolume(path); err == nil {
			return nil
		}
		// Without the ioctl (non-root, no user_subvol_rm_allowed) files
		// can only go one by one, which a read-only subvolume refuses.
		_ = setSubvolumeReadOnly(path, false)
	}
	// The big files' blocks are freed before the caller returns, not in
	// the filesystem's background after it (fsutil.FreeBlocks).
	return fsutil.RemoveClone(path, freeBlocksMin)
}

// freeBlocksMin: files smaller than this are left to the removal (a
// truncate each would cost more than it saves).
const freeBlocksMin = 1 << 20
