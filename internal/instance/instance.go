package instance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Options for Create.
type Options struct {
	Backend  string            // "auto" or a backend name
	Settings map[string]string // extra server settings
	Detached bool              // `up`: the instance outlives this process
	Database string
	Owner    string
	Password string // empty: a random one
	Recipe   string // absolute path of the recipe, recorded for `dbfork reset`
	// TryPorts are ports the server tries first (engine.StartSpec.TryPorts;
	// tests hold one to prove a taken port is retried).
	TryPorts []int
	// Ahead: the instance is made ahead of need (a pool), beside tests
	// that run: its clone and restore run at a lower CPU priority.
	Ahead bool
	// CloseSlots: no one hands this instance's slots out (only the
	// daemon does, per fresh call), so its server refuses them and the
	// golden is checked without their files (golden.ClosableSlots): a
	// 32-slot golden's instance then costs what one without slots does.
	CloseSlots bool

	from *restored // Recycle: a restored clone to move in instead of cloning
}

// Instance is a created instance and the lock that marks it in use.
type Instance struct {
	State *State
	lock  *lockfile.Lock
	// PrepareAhead: after a Reset whose later work runs in the background
	// (the daemon), make the clone for the next reset there too (ahead.go).
	PrepareAhead bool
	ahead        *aheadWork
	removing     <-chan struct{} // closed when the last reset's after-work ended
	marks        *backend.Marks  // the clone's files as made (restore.go)
}

// Detach marks the instance as living on after this process (`up`): from
// now on gc keeps it while its server runs. Until then a crash of its
// creator makes it a leftover.
func (in *Instance) Detach() error {
	in.State.Detached = true
	return in.State.save()
}

// Release drops the in-use lock without tearing anything down (for `up`,
// whose instance lives on).
func (in *Instance) Release() {
	in.stopAhead() // no background work on an instance we no longer hold
	in.lock.Release()
}

// Create clones g with the chosen backend and starts a server on the clone
// under the test profile. The record on disk is updated before every step
// that makes something gc must undo (a mount, a process).
func Create(ctx context.Context, s *store.Store, eng engine.Engine, g *golden.Golden, o Options) (in *Instance, err error) {
	t0 := time.Now()
	golden.MarkUsed(s, g.Key, "")
	if err := golden.Share(s, g); err != nil {
		return nil, err
	}
	// The golden's quick check (a stat per file: 21 ms of CPU for the
	// 11,300 files of a 1 GB golden with 32 slots, about the clone and
	// the server's start together) runs beside the clone and the start,
	// from a thread at background priority (and a second one: see
	// golden.CheckClonable);
	// nothing is handed out before it passed, and a golden that fails it
	// has its instance torn down. The clone's mount is nosuid and nodev
	// meanwhile, and the build removed what the check looks for.
	if g.Manifest.Intermediate != nil {
		return nil, golden.CheckClonable(g) // refused at once
	}
	var closed []string
	if o.CloseSlots {
		closed, _ = g.ClosableSlots()
	}
	checked := make(chan error, 1)
	if o.from == nil { // Recycle checked it before restoring from it
		go func() {
			checked <- proc.Niced(proc.Background, func() error { return checkFor(g, closed) })
		}()
	} else {
		checked <- nil
	}
	defer func() {
		if checked == nil {
			return
		}
		// Never leave the check running past the call; and where a
		// damaged golden made the clone or the start fail, say so.
		if cerr := <-checked; cerr != nil && err != nil {
			err = cerr
		}
	}()
	b, why, err := backend.Select(ctx, o.Backend, s.InstancesDir(), g.DataDir())
	if err != nil {
		return nil, err
	}
	id := newID()
	lock, err := lockfile.TryLock(lockPath(s, id))
	if err != nil {
		return nil, err
	}
	st := newState(s, id, eng, g, b.Name(), why, o)
	st.Closed = closed
	dir := st.Dir
	in = &Instance{State: st, lock: lock}
	defer func() {
		if err != nil {
			// Tear down with a fresh context: ctx may be what was cancelled.
			if terr := teardown(context.Background(), st); terr != nil {
				err = fmt.Errorf("%w (cleanup also failed: %v; run `dbfork gc`)", err, terr)
			}
			lock.Remove()
		}
	}()
	if err := makeDir(s, eng, st); err != nil {
		return nil, err
	}
	u, err := claimUser(s, st)
	if err != nil {
		return nil, err
	}
	if o.from != nil {
		// Recycle: the clone exists, restored; it only moves here.
		if err := os.Rename(o.from.dataDir, st.DataDir); err != nil {
			return nil, fmt.Errorf("move restored clone into instance %s: %w", id, err)
		}
	} else if err := aheadOf(o, func() error { return b.Prepare(ctx, g.DataDir(), st.DataDir, st.Scratch) }); err != nil {
		return nil, fmt.Errorf("clone golden %s with %s: %w", g.Key[:12], b.Name(), err)
	}
	if err := handOver(st.DataDir, u.UID); err != nil {
		return nil, err
	}
	_ = aheadOf(o, func() error { in.keepMarks(b, o.from); return nil })
	st.CloneMs = ms(time.Since(t0))
	faults.At("up:cloned")
	sock, err := socketDir(u, dir)
	if err != nil {
		return nil, err
	}
	pw := o.Password
	if pw == "" {
		pw = textutil.Password()
	}
	t1 := time.Now()
	srv, err := eng.Start(ctx, engine.StartSpec{
		DataDir: st.DataDir, SocketDir: sock, LogFile: filepath.Join(dir, "server.log"), RunDir: dir,
		Listen: true, Profile: engine.ProfileTest, Settings: o.Settings, User: u,
		Database: orDefault(o.Database, g.Manifest.Database), Owner: orDefault(o.Owner, g.Manifest.Owner),
		Password: pw, Closed: st.Closed, Wrap: wrapFor(b, g, st), TryPorts: o.TryPorts,
		OnLaunch: func(srv *engine.Server) error { st.Server = srv; return st.save() },
	})
	if srv != nil {
		st.Server = srv
	}
	if err != nil {
		return nil, err
	}
	err, checked = <-checked, nil
	if err != nil {
		return nil, err
	}
	st.StartMs = ms(time.Since(t1))
	st.ReadyMs = ms(time.Since(t0))
	st.ReadySteps = map[string]float64{"clone": st.CloneMs, "start": st.StartMs}
	conn := eng.Conn(srv)
	st.Conn = &conn
	st.Status = StatusReady
	if err := st.save(); err != nil {
		return nil, err
	}
	faults.At("up:started")
	return in, nil
}

// checkFor is the golden's check for an instance that closes the slots
// named (none: the whole golden).
func checkFor(g *golden.Golden, closed []string) error {
	if len(closed) > 0 {
		return golden.CheckClonableSlotsClosed(g)
	}
	return golden.CheckClonable(g)
}

// aheadOf runs fn, a walk of the whole clone, at background priority
// when the instance is made ahead of need (Options.Ahead).
func aheadOf(o Options, fn func() error) error {
	if !o.Ahead {
		return fn()
	}
	return proc.Niced(proc.Background, fn)
}

// newState is the first record of a new instance: creating, no server.
func newState(s *store.Store, id string, eng engine.Engine, g *golden.Golden, backendName, why string, o Options) *State {
	dir := s.InstanceDir(id)
	st := &State{
		ID: id, Key: g.Key, Engine: eng.Name(), Backend: backendName, BackendWhy: why,
		Status: StatusCreating, Detached: o.Detached, Dir: dir,
		DataDir: filepath.Join(dir, "data"), Scratch: filepath.Join(dir, "scratch"),
		Created: time.Now().UTC(), Recipe: o.Recipe, Settings: o.Settings,
	}
	st.PIDFile = eng.PIDFile(st.DataDir)
	return st
}

// makeDir creates the instance dir (with eng's copy-on-write extent size
// hint) and records the instance in it.
func makeDir(s *store.Store, eng engine.Engine, st *State) error {
	if err := os.Mkdir(st.Dir, 0o755); err != nil {
		return fmt.Errorf("create instance dir: %w", err)
	}
	if sz := cowExtSize(s, eng); sz > 0 {
		// Inherited by everything created below: reflinked files and an
		// overlay's upper dir. Only a hint; a failure costs disk, not
		// correctness.
		if err := fsutil.SetCowExtSize(st.Dir, sz); err != nil {
			slog.Debug("cowextsize not set", "dir", st.Dir, "err", err)
		}
	}
	return st.save()
}

// socketDir makes the server's private socket dir in dir.
func socketDir(u store.User, dir string) (string, error) {
	sock := filepath.Join(dir, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		return "", err
	}
	return sock, u.Chown(sock)
}

// Destroy stops and removes an instance this process holds.
func (in *Instance) Destroy(ctx context.Context, s *store.Store) error {
	in.stopAhead()
	err := teardown(ctx, in.State)
	if err == nil {
		in.lock.Remove()
	} else {
		in.lock.Release()
	}
	return err
}

// Down stops and removes an instance by id. It refuses an instance another
// live process holds (a running `dbfork run`, or an `up` still starting).
func Down(ctx context.Context, s *store.Store, id string) error {
	lock, err := lockInstance(ctx, s, id)
	if err != nil {
		return err
	}
	defer lock.Release()
	st, err := Load(s, id)
	if err != nil {
		return err
	}
	if err := teardown(ctx, st); err != nil {
		return err
	}
	_ = os.Remove(lockPath(s, id))
	return nil
}

// lockInstance takes an instance's lock for a command acting on it. gc
// and other commands hold it for a moment while they look at an
// instance: that is waited out, but not a process that really uses it.
func lockInstance(ctx context.Context, s *store.Store, id string) (*lockfile.Lock, error) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	lock, err := lockfile.Acquire(wctx, lockPath(s, id), nil)
	cancel()
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = lockfile.ErrHeld
	}
	if errors.Is(err, lockfile.ErrHeld) {
		return nil, errs.Conflict("instance %s is in use by another dbfork process (a running `dbfork run`, `serve` or `up`); stop that process instead", id)
	}
	return lock, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// cowExtSize is the XFS copy-on-write extent size hint for clones of eng:
// one engine page, or the store's setting (DBFORK_XFS_COWEXTSIZE bytes,
// 0 keeps the filesystem default; a knob for measuring, see
// docs/performance.md).
func cowExtSize(s *store.Store, eng engine.Engine) uint32 {
	if s.CowExtSize != nil {
		return *s.CowExtSize
	}
	if ps, ok := eng.(engine.PageSizer); ok {
		return ps.PageSize()
	}
	return 0
}
