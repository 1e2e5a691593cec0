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

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/proc"
)

// Backend is one way to clone a golden data directory.
//
// Checklist for an implementation (docs/adding-a-backend.md; check in
// registry.go refuses a table entry that misses a part, and the shared
// suite in backendtest checks the behaviour):
//   - Name is what users type after --backend and what records keep; it
//     is unique in the table.
//   - Describe says, for the user, what choosing the backend means
//     (doctor prints it; auto gives it as its reason).
//   - Caps says what its clones cost: exactly one of SharesExtents,
//     CopiesUp and FullCopy, plus ColdPageCache where it applies.
//   - Probe really tries the operation in a scratch dir below dir and
//     returns an error that says how to make it work when it cannot.
//   - Prepare creates clone (which must not exist) as a writable view of
//     golden with the same content, modes and owners; writes to the clone
//     never reach golden. scratch is a private directory Prepare may use
//     (OverlayFS upper and work dirs).
//   - Remove undoes Prepare from the paths alone, so that it works after a
//     crash; it is idempotent and never deletes through a mount.
//
// Optional parts, found by type assertion: CopyUpper and Diverger (both
// required where Caps.CopiesUp), GoldenChecker, GoldenSide, Yielder,
// Namespaced, Restorer.
type Backend interface {
	Name() string
	Describe() string
	Caps() Caps
	Probe(ctx context.Context, dir string) error
	Prepare(ctx context.Context, golden, clone, scratch string) error
	Remove(ctx context.Context, clone, scratch string) error
}

// Caps is what a backend's clones cost, for the callers that plan around
// it (pools, capacity, warming, doctor) instead of asking for a name.
type Caps struct {
	// SharesExtents: a clone shares the golden's extents, and a first
	// write copies only the blocks written (btrfs snapshot, reflink).
	SharesExtents bool
	// CopiesUp: a clone copies a file whole on its first read-write open
	// (OverlayFS); CopyUpper says whether that copy shares extents.
	CopiesUp bool
	// FullCopy: a clone is a byte copy of the whole golden; its time and
	// disk grow with the golden, and nothing is shared.
	FullCopy bool
	// ColdPageCache: a new clone's files do not share the golden's cached
	// pages (Linux caches shared extents once per file), so it is slow
	// until read once.
	ColdPageCache bool
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

// GoldenChecker is implemented by backends that can clone only some
// goldens (btrfs needs the golden to be a subvolume).
type GoldenChecker interface {
	CanClone(golden string) error
}

// Yielder is implemented by a backend that auto passes over where another
// one works too: YieldTo names that one and says why it is the better
// pick there.
type Yielder interface {
	YieldTo() (name, why string)
}

// Owned is the dir holding what a clone made by b owns: OwnedDir where b
// keeps it apart, else the clone itself. b may be nil (a record naming a
// backend this dbfork does not know).
func Owned(b Backend, clone, scratch string) (dir string, apart bool) {
	if d, ok := b.(Diverger); ok {
		return d.OwnedDir(clone, scratch), true
	}
	return clone, false
}

// CheapCopyUp reports whether clones made by b with this scratch dir copy
// files on their first read-write open, cheaply (false when they do not
// copy at all, or b is nil).
func CheapCopyUp(b Backend, scratch string) bool {
	c, ok := b.(CopyUpper)
	return ok && c.CheapCopyUp(scratch)
}

// WholeFileCopyUp reports whether clones made by b with this scratch dir
// copy a whole file on its first read-write open (OverlayFS on a
// filesystem that cannot reflink, such as ext4): the first-write trap.
func WholeFileCopyUp(b Backend, scratch string) bool {
	return b != nil && b.Caps().CopiesUp && !CheapCopyUp(b, scratch)
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
