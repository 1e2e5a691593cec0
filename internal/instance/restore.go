package instance

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Resetting a clone whose backend can restore it (backend.Restorer) does
// not make a new clone: with the server stopped, only the files it
// changed are made again from the golden. The clone's files are marked
// when it is made (before its server first starts) and after every
// restore; the marks are kept in memory and in the instance dir, for
// `dbfork reset ID` from another process.
const marksFile = "clone.marks"

// restored is a clone put back to its golden, waiting to move into a new
// instance (Recycle → Create).
type restored struct {
	dataDir string
	marks   *backend.Marks
}

// keepMarks records the marks of a new instance's clone: those of a
// recycled clone as they are, else the clone's files as Prepare made
// them. A clone without marks is reset by cloning again.
func (in *Instance) keepMarks(b backend.Backend, from *restored) {
	if _, ok := b.(backend.Restorer); !ok {
		return
	}
	m := (*backend.Marks)(nil)
	if from != nil {
		m = from.marks
	} else {
		var err error
		if m, err = backend.MarkClone(in.State.DataDir); err != nil {
			slog.Debug("clone not marked; resets clone anew", "id", in.State.ID, "err", err)
			return
		}
	}
	if err := m.Save(filepath.Join(in.State.Dir, marksFile)); err != nil {
		slog.Debug("clone marks not saved; resets clone anew", "id", in.State.ID, "err", err)
		return
	}
	in.marks = m
}

// Recyclable says, without touching the instance, whether Recycle can
// restore it rather than having it destroyed and a new one made: its
// backend restores, it has a uid of its own and its clone was marked.
func (in *Instance) Recyclable() bool {
	b, err := backend.Get(in.State.Backend)
	if err != nil {
		return false
	}
	if _, ok := b.(backend.Restorer); !ok || !store.IsDynamicUID(in.State.UID) {
		return false
	}
	if in.marks != nil {
		return true
	}
	_, err = os.Stat(filepath.Join(in.State.Dir, marksFile))
	return err == nil
}

// canRestore returns the restorer and marks for resetting in's clone by
// restoring it, or nil when it must be cloned anew: the backend cannot,
// the clone has no marks, or the instance has no uid of its own. Only a
// uid of its own lets every process that could still write in the clone
// be found and killed first (programs a test's SQL started keep running
// otherwise, their working dir in the clone); an unprivileged daemon's
// servers run as the daemon's user.
func (in *Instance) canRestore(b backend.Backend) (backend.Restorer, *backend.Marks) {
	rb, ok := b.(backend.Restorer)
	if !ok {
		return nil, nil
	}
	if !store.IsDynamicUID(in.State.UID) {
		return nil, nil
	}
	if in.marks == nil {
		m, err := backend.LoadMarks(filepath.Join(in.State.Dir, marksFile))
		if err != nil {
			return nil, nil
		}
		in.marks = m
	}
	return rb, in.marks
}

// restoreStopped puts the clone of a stopped instance back to g's
// content. The marks file is removed first, so a crash part-way leaves a
// clone that the next reset clones anew.
func (rs *resetRun) restoreStopped(ctx context.Context, in *Instance, rb backend.Restorer, m *backend.Marks) error {
	st := rs.st
	path := filepath.Join(st.Dir, marksFile)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	in.marks = nil
	did, err := rb.Restore(ctx, rs.g.DataDir(), st.DataDir, m)
	if err != nil {
		return err
	}
	faults.At("reset:restored")
	if err := m.Save(path); err != nil {
		return err
	}
	in.marks = m
	st.Restored = &did
	rs.lap("restore")
	return nil
}

// resetByRestore is Reset for a clone that can be restored: stop the
// server at once, restore the files it changed, start it again.
func (in *Instance) resetByRestore(ctx context.Context, s *store.Store, eng engine.Engine, g *golden.Golden, rb backend.Restorer, m *backend.Marks) error {
	st := in.State
	b, _ := backend.Get(st.Backend)
	in.stopAhead() // a clone made ahead by an earlier reset is not needed
	rs := &resetRun{st: st, b: b, g: g, t0: time.Now(), steps: map[string]float64{}}
	rs.t = rs.t0
	old := *st.Server
	st.Status = StatusResetting
	if err := st.save(); err != nil {
		return err
	}
	if err := rs.stopServer(ctx); err != nil {
		return err
	}
	faults.At("reset:stopped")
	if err := rs.restoreStopped(ctx, in, rb, m); err != nil {
		return err
	}
	if err := handOver(st.DataDir, st.UID); err != nil {
		return err
	}
	faults.At("reset:cloned")
	return rs.startAgain(ctx, s, eng, old, old.Password)
}

// Recycle makes a new instance out of a released one without cloning:
// its server is stopped, its clone restored to g and moved into a new
// instance (new id, uid, password and port, so nothing a former holder
// knows reaches it), which starts as Create's does. in is torn down
// whatever happens, but for clones that cannot be restored (see
// canRestore): those are refused with errs.Unsupported before anything
// is done, and the caller destroys in itself.
func (in *Instance) Recycle(ctx context.Context, s *store.Store, eng engine.Engine, g *golden.Golden, o Options) (*Instance, error) {
	st := in.State
	destroy := func(err error) error {
		if derr := in.Destroy(context.Background(), s); derr != nil {
			slog.Warn("removing a recycled instance failed; `dbfork gc` removes it", "id", st.ID, "err", derr)
		}
		return err
	}
	b, err := resettable(st, g)
	if err != nil {
		return nil, destroy(err)
	}
	rb, m := in.canRestore(b)
	if rb == nil {
		return nil, errs.Unsupported("instance %s cannot be restored in place", st.ID)
	}
	in.stopAhead()
	rs := &resetRun{st: st, b: b, g: g, t0: time.Now(), steps: map[string]float64{}}
	rs.t = rs.t0
	st.Status = StatusResetting
	if err := st.save(); err != nil {
		return nil, destroy(err)
	}
	if err := rs.stopServer(ctx); err != nil {
		return nil, destroy(err)
	}
	if err := aheadOf(o, func() error { return rs.restoreStopped(ctx, in, rb, m) }); err != nil {
		return nil, destroy(fmt.Errorf("recycle instance %s: %w", st.ID, err))
	}
	o.Backend, o.from = b.Name(), &restored{dataDir: st.DataDir, marks: m}
	nin, err := Create(ctx, s, eng, g, o)
	if err != nil {
		return nil, destroy(fmt.Errorf("recycle instance %s: %w", st.ID, err))
	}
	nin.State.Restored, nin.State.RecycledFrom = st.Restored, st.ID
	steps := rs.steps // stop, restore
	steps["move"], steps["start"] = nin.State.CloneMs, nin.State.StartMs
	nin.State.ReadySteps = steps
	nin.State.ReadyMs = ms(time.Since(rs.t0))
	_ = nin.State.save()
	return nin, destroy(nil)
}
