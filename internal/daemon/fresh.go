package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
)

// find returns a lease the caller may act on, leaving it in the table.
func (d *Daemon) find(id string, peer api.Peer) (*lease, error) {
	if !instance.ValidID(id) {
		return nil, errs.Invalid("lease id %q is not an instance id (8 hex digits)", id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[id]
	if !ok || !peer.Owns(l.owner) {
		return nil, errs.NotFound("no lease %s (already released, reclaimed, or never leased here)", id)
	}
	return l, nil
}

// takeIf removes l from the table unless someone else already did.
func (d *Daemon) takeIf(l *lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.leases[l.ID] != l {
		return false
	}
	delete(d.leases, l.ID)
	return true
}

// Reset implements api.Service: the lease's instance goes back to the
// golden state in place (same host, port, user, password and database).
// The work runs under the lease's own life, not the caller's request: a
// caller that gives up does not leave a half-reset instance behind (the
// reset finishes, or ends with the lease when the holder is gone).
func (d *Daemon) Reset(ctx context.Context, id string, peer api.Peer) (*api.Lease, error) {
	l, err := d.find(id, peer)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- d.reset(l) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, fmt.Errorf("reset lease %s: %w (the reset goes on without you)", id, ctx.Err())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := l.Lease
	return &out, nil
}

func (d *Daemon) reset(l *lease) error {
	l.op.Lock()
	return d.resetLocked(l)
}

// resetLocked is reset for a caller that holds l.op; it lets go of it.
func (d *Daemon) resetLocked(l *lease) error {
	defer l.op.Unlock()
	if l.life.Err() != nil {
		return errs.NotFound("no lease %s (released while the reset waited)", l.ID)
	}
	t0 := time.Now()
	steps, err := d.resetDatabase(l)
	if err != nil {
		if l.life.Err() == nil && l.spares != nil {
			d.o.Log.Warn("resetting the database in place failed; resetting the instance", "id", l.ID, "err", err)
		}
		l.in.PrepareAhead = true
		l.fr.retiring.Wait() // no late close of a slot of the restored instance
		if l.spares != nil {
			l.spares.invalidate() // its databases go with the old clone
		}
		err = l.in.Reset(l.life, d.o.Store, l.entry.eng, l.entry.golden, func(f func()) { go f() })
		steps = l.in.State.ResetSteps
		if err == nil {
			l.wholeReset()
			l.noteReset()
		}
		if err == nil && l.spares != nil {
			err = d.remakeSpares(l)
		}
	}
	if err != nil {
		if l.life.Err() != nil {
			// Released (or the daemon closes) meanwhile: whoever ended
			// the lease removes the instance once we let go.
			return errs.NotFound("lease %s ended during its reset", l.ID)
		}
		// The instance is in an unknown state: the lease ends.
		if d.takeIf(l) {
			l.cancel()
			_ = d.discard(l)
		}
		d.o.Log.Error("reset failed; lease ended", "id", l.ID, "err", err)
		return fmt.Errorf("reset lease %s: %w; the lease has ended, acquire a new one", l.ID, err)
	}
	l.fr.ownClosed = false // swapped for a new database, or restored with the instance: open again
	d.mu.Lock()
	l.Lease.Resets = l.in.State.Resets
	l.Lease.ResetMs = msSince(t0)
	l.Lease.ResetSteps = steps
	d.mu.Unlock()
	d.o.Log.Info("reset", "id", l.ID, "ms", l.Lease.ResetMs)
	return nil
}

// resetDatabase is the fast reset of a lease that has fresh databases:
// its own database is swapped for a spare (two renames; the old one is
// dropped later, spares.dropLater), or, with no spare ready, dropped (breaking
// its connections) and cloned again from the idle template, inside the
// running server.
func (d *Daemon) resetDatabase(l *lease) (map[string]float64, error) {
	dc, ok := l.entry.eng.(engine.DatabaseCloner)
	if l.spares == nil || !ok {
		return nil, errs.Unsupported("no template database")
	}
	srv := l.in.State.Server
	t0 := time.Now()
	if spare := l.spares.take(srv); spare != "" {
		trash := newDBName()
		err := dc.SwapDatabase(l.life, srv, srv.Database, spare, trash)
		l.spares.poke() // clone the next spare
		if err == nil {
			l.spares.dropLater(srv, trash)
			return map[string]float64{"swap in a spare database": msSince(t0)}, nil
		}
		d.o.Log.Warn("swapping in a spare database failed; cloning one", "id", l.ID, "err", err)
		l.spares.dropLater(srv, spare)
		t0 = time.Now()
	}
	if err := dc.DropDatabases(l.life, srv, []string{srv.Database}); err != nil {
		return nil, err
	}
	t1 := time.Now()
	if err := dc.CloneDatabases(l.life, srv, templateDB, []string{srv.Database}, nil); err != nil {
		return nil, err
	}
	return map[string]float64{"drop": msSince(t0) - msSince(t1), "clone database": msSince(t1)}, nil
}

// remakeSpares gives a lease whose instance was reset whole (its template
// and spares went with the old clone) a new template and spares.
func (d *Daemon) remakeSpares(l *lease) error {
	dc := l.entry.eng.(engine.DatabaseCloner)
	sp := l.spares
	if err := dc.MakeTemplate(l.life, l.in.State.Server, templateDB); err != nil {
		return err
	}
	sp.mu.Lock()
	sp.ready, sp.handed = nil, map[string]bool{}
	sp.server = l.in.State.Server // only now: the template exists
	sp.gen++
	sp.mu.Unlock()
	sp.poke()
	return nil
}
