package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Reset takes a ready instance back to its golden in place: the server is
// stopped (immediately: its data is thrown away), the clone is removed and
// made again from g, and the server starts on the same port, socket dir,
// database, owner and password, so every DSN stays valid. Connections
// open before the reset are broken.
//
// The record is saved before each step gc would have to undo, as in
// Create. On error the instance is left as it is (possibly without a
// server): the caller destroys it.
//
// later runs the removal of the old clone once the server is back: the
// daemon passes one that runs it in the background, off the caller's
// path; nil runs it before Reset returns.
func (in *Instance) Reset(ctx context.Context, s *store.Store, eng engine.Engine, g *golden.Golden, later func(func())) error {
	if later == nil {
		later = func(f func()) { f() }
	}
	st := in.State
	if err := golden.Share(s, g); err != nil {
		return err
	}
	b, err := resettable(st, g)
	if err != nil {
		return err
	}
	if rb, m := in.canRestore(b); rb != nil {
		return in.resetByRestore(ctx, s, eng, g, rb, m)
	}
	t0 := time.Now()
	ready, err := in.takeAhead(ctx)
	if err != nil {
		return err
	}
	rs := &resetRun{st: st, b: b, g: g, t0: t0, steps: map[string]float64{}, ready: ready}
	rs.t = rs.t0
	old := *st.Server
	st.Status = StatusResetting
	if err := st.save(); err != nil {
		return err
	}
	// A clone that is a plain dir (reflink, btrfs, copy) is made beside
	// the running server and swapped in by rename; the old one is removed
	// after the server is back (later). A mounted clone (overlay) cannot
	// be renamed: it is remade in place while the server is down.
	mounted, err := fsutil.IsMountpoint(st.DataDir)
	if err != nil {
		return err
	}
	if !mounted {
		if err := rs.cloneBeside(ctx); err != nil {
			return err
		}
	}
	if err := rs.stopServer(ctx); err != nil {
		return err
	}
	faults.At("reset:stopped")
	if mounted {
		if err := rs.recloneInPlace(ctx); err != nil {
			return err
		}
	} else {
		if err := rs.swapIn(ctx); err != nil {
			return err
		}
		defer later(in.afterReset(b, g))
	}
	faults.At("reset:cloned")
	return rs.startAgain(ctx, s, eng, old, old.Password)
}

// startAgain starts the reset clone's server as old was (port, socket
// dir, database, owner) with password, and records the reset.
func (rs *resetRun) startAgain(ctx context.Context, s *store.Store, eng engine.Engine, old engine.Server, password string) error {
	st := rs.st
	srv, err := eng.Start(ctx, engine.StartSpec{
		DataDir: st.DataDir, SocketDir: old.SocketDir, LogFile: filepath.Join(st.Dir, "server.log"), RunDir: st.Dir,
		Port: old.Port, Listen: old.Listen, Profile: engine.ProfileTest, Settings: st.Settings, User: s.UserOf(st.UID),
		Database: old.Database, Owner: old.User, Password: password, Closed: st.Closed, Wrap: wrapFor(rs.b, rs.g, st),
		OnLaunch: func(srv *engine.Server) error { st.Server = srv; return st.save() },
	})
	if srv != nil {
		st.Server = srv
	}
	if err != nil {
		return fmt.Errorf("start server after reset: %w", err)
	}
	rs.lap("start")
	st.Status = StatusReady
	st.ResetSteps = rs.steps
	st.Resets++
	st.ResetMs = ms(time.Since(rs.t0))
	return st.save()
}

// resettable checks st is a ready clone of g and returns its backend.
func resettable(st *State, g *golden.Golden) (backend.Backend, error) {
	if st.Server == nil || st.Conn == nil || st.Status != StatusReady {
		return nil, errs.Conflict("instance %s is %s, not ready: only a ready instance can be reset", st.ID, st.Status)
	}
	if g.Key != st.Key {
		return nil, errs.Invalid("instance %s is a clone of golden %s, not %s", st.ID, golden.Short(st.Key), golden.Short(g.Key))
	}
	if err := checkFor(g, st.Closed); err != nil {
		return nil, err
	}
	return backend.Get(st.Backend)
}

// resetRun is one Reset under way: what it works on and how long each
// step took (State.ResetSteps).
type resetRun struct {
	st    *State
	b     backend.Backend
	g     *golden.Golden
	t0, t time.Time
	steps map[string]float64
	ready bool // the next clone was made ahead (ahead.go)
}

// lap records the time since the last lap as step name.
func (rs *resetRun) lap(name string) {
	rs.steps[name] = ms(time.Since(rs.t))
	rs.t = time.Now()
}

// cloneBeside makes the next clone beside the running server's.
func (rs *resetRun) cloneBeside(ctx context.Context) error {
	st, next := rs.st, rs.st.DataDir+nextSuffix
	if rs.ready {
		rs.lap("wait for the clone made ahead")
		return nil
	}
	if err := removeClone(ctx, rs.b, next, st.Scratch+nextSuffix); err != nil {
		return err
	}
	if err := rs.b.Prepare(ctx, rs.g.DataDir(), next, st.Scratch+nextSuffix); err != nil {
		return fmt.Errorf("clone golden %s with %s: %w", golden.Short(rs.g.Key), rs.b.Name(), err)
	}
	if err := handOver(next, st.UID); err != nil {
		return err
	}
	rs.lap("clone")
	return nil
}

// stopServer stops the instance's server at once (its data is thrown
// away); the pid file stays the fallback record.
func (rs *resetRun) stopServer(ctx context.Context) error {
	st := rs.st
	if err := engine.StopRecorded(ctx, st.Server, false); err != nil {
		return fmt.Errorf("stop server of %s: %w", st.ID, err)
	}
	st.Server = nil
	if err := st.save(); err != nil {
		return err
	}
	// What the test's SQL started goes too (it would also keep a mounted
	// clone busy).
	if err := killUserProcesses(ctx, st); err != nil {
		return err
	}
	rs.lap("stop")
	return nil
}

// recloneInPlace removes a mounted clone and makes it again from the
// golden while the server is down.
func (rs *resetRun) recloneInPlace(ctx context.Context) error {
	st := rs.st
	if err := removeClone(ctx, rs.b, st.DataDir, st.Scratch); err != nil {
		return err
	}
	rs.lap("remove")
	if err := rs.b.Prepare(ctx, rs.g.DataDir(), st.DataDir, st.Scratch); err != nil {
		return fmt.Errorf("clone golden %s with %s: %w", golden.Short(rs.g.Key), rs.b.Name(), err)
	}
	if err := handOver(st.DataDir, st.UID); err != nil {
		return err
	}
	rs.lap("clone")
	return nil
}

// swapIn sets the old clone aside and renames the next one into place.
func (rs *resetRun) swapIn(ctx context.Context) error {
	st := rs.st
	next, aside := st.DataDir+nextSuffix, st.DataDir+asideSuffix
	if err := removeClone(ctx, rs.b, aside, st.Scratch+asideSuffix); err != nil {
		return err
	}
	if err := os.Rename(st.DataDir, aside); err != nil {
		return fmt.Errorf("set the old clone aside: %w", err)
	}
	if err := os.Rename(next, st.DataDir); err != nil {
		return fmt.Errorf("swap in the new clone: %w", err)
	}
	if _, ok := rs.b.(backend.Namespaced); ok {
		// Its content is in the scratch dir (the upper dir): swap that too.
		if err := swapScratch(st.Scratch); err != nil {
			return err
		}
	}
	rs.lap("swap")
	return nil
}

// Beside the clone during a reset: the next one, made while the server
// still runs, and the old one, removed once the server is back. teardown
// removes both if a crash left them.
const (
	nextSuffix  = ".next"
	asideSuffix = ".old"
	trashSuffix = ".old2" // the old clone while the background removes it (ahead.go)
)

// removeClone undoes Prepare at clone/scratch (idempotent).
func removeClone(ctx context.Context, b backend.Backend, clone, scratch string) error {
	if err := b.Remove(ctx, clone, scratch); err != nil {
		return fmt.Errorf("remove clone %s: %w", filepath.Base(clone), err)
	}
	if err := backend.RemoveDataDir(clone); err != nil {
		return err
	}
	return fsutil.RemoveAll(scratch)
}

// ResetByID resets an instance no live process holds (one made by `up`,
// or kept from a lease), taking its lock for the time of the reset. An
// instance whose reset failed is torn down: the error says so.
func ResetByID(ctx context.Context, s *store.Store, id string, eng engine.Engine, g *golden.Golden) (*State, error) {
	lock, err := lockInstance(ctx, s, id)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	st, err := Load(s, id)
	if err != nil {
		return nil, err
	}
	if st.Status == StatusReady && !st.Alive() {
		return nil, errs.Conflict("instance %s has no running server (see `dbfork ls`); remove it with `dbfork down %s`", id, id)
	}
	in := &Instance{State: st, lock: lock}
	if err := in.Reset(ctx, s, eng, g, nil); err != nil {
		if st.Status == StatusReady {
			return nil, err // refused before anything changed
		}
		if terr := teardown(context.Background(), st); terr != nil {
			return nil, fmt.Errorf("%w (removing the instance also failed: %v; run `dbfork gc`)", err, terr)
		}
		_ = os.Remove(lockPath(s, id))
		return nil, fmt.Errorf("%w; instance %s was removed", err, id)
	}
	return st, nil
}

// swapScratch puts a namespaced clone's next scratch dir in place and the
// old one aside (removed with the old clone).
func swapScratch(scratch string) error {
	if err := os.Rename(scratch, scratch+asideSuffix); err != nil {
		return fmt.Errorf("set the old scratch dir aside: %w", err)
	}
	if err := os.Rename(scratch+nextSuffix, scratch); err != nil {
		return fmt.Errorf("swap in the new scratch dir: %w", err)
	}
	return nil
}

// wrapFor is the StartSpec.Wrap for a clone of backend b (nil but for
// namespaced backends, whose clone is mounted as the server starts).
func wrapFor(b backend.Backend, g *golden.Golden, st *State) func([]string, *syscall.SysProcAttr) []string {
	if ns, ok := b.(backend.Namespaced); ok {
		return ns.Wrap(g.DataDir(), st.DataDir, st.Scratch)
	}
	return nil
}
