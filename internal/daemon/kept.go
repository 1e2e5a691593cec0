package daemon

import (
	"context"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
)

// A lease kept through the daemon (`dbfork up`) leaves the daemon's
// tables, but its record stays the daemon's: a root daemon's store is
// root's, and the user who kept it cannot read it. Keep writes that
// user's uid into the record, and the daemon takes the instance down or
// resets it for them (and for root), and for nobody else.

// keptFor is the record of a kept instance peer may act on.
func (d *Daemon) keptFor(id string, peer api.Peer) (*instance.State, error) {
	if !instance.ValidID(id) {
		return nil, errs.Invalid("instance id %q is not an instance id (8 hex digits)", id)
	}
	st, err := instance.Load(d.o.Store, id)
	// UID -1: a peer whose credentials the kernel did not give owns
	// nothing, not even what TCP callers (owner -1) kept.
	if err != nil || !st.Detached || st.Owner == nil || !(peer.All() || peer.UID >= 0 && peer.UID == *st.Owner) {
		// Another user's instance is not there for you.
		return nil, errs.NotFound("no instance %s kept through this daemon by you (see `dbfork ls`)", id)
	}
	return st, nil
}

// keptTimeout bounds a down or reset the daemon does for a caller; it
// runs to its end even if the caller leaves, so nothing is left half done.
const keptTimeout = 2 * time.Minute

// DownKept implements api.Service.
func (d *Daemon) DownKept(ctx context.Context, id string, peer api.Peer) error {
	if _, err := d.keptFor(id, peer); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keptTimeout)
	defer cancel()
	if err := instance.Down(ctx, d.o.Store, id); err != nil {
		return err
	}
	d.o.Log.Info("kept instance removed", "id", id, "uid", peer.UID)
	return nil
}

// ResetKept implements api.Service.
func (d *Daemon) ResetKept(ctx context.Context, id string, peer api.Peer) (*api.Lease, error) {
	st, err := d.keptFor(id, peer)
	if err != nil {
		return nil, err
	}
	g, err := golden.Lookup(d.o.Store, st.Key)
	if err != nil {
		return nil, err
	}
	eng, err := d.keptEngine(ctx, st, g, peer)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keptTimeout)
	defer cancel()
	if st, err = instance.ResetByID(rctx, d.o.Store, id, eng, g); err != nil {
		return nil, err
	}
	d.o.Log.Info("kept instance reset", "id", id, "uid", peer.UID, "ms", st.ResetMs)
	l := &api.Lease{ID: st.ID, Golden: st.Key, Engine: st.Engine, Backend: st.Backend, Fresh: api.FreshReset,
		Leased: st.Created, ReadyMs: st.ReadyMs, InstanceDir: st.Dir, Kept: true, Env: st.ClientEnv(),
		Resets: st.Resets, ResetMs: st.ResetMs, ResetSteps: st.ResetSteps}
	if st.Conn != nil {
		l.DSN, l.SocketDSN = st.Conn.URL, st.Conn.SocketURL
		l.Env = d.clientEnv(l.Env, peer)
	}
	return l, nil
}

// keptEngine is the engine to restart a kept instance of golden g with:
// a pool's of the same golden, else the one its recipe names (read as
// the caller, like every recipe a peer names).
func (d *Daemon) keptEngine(ctx context.Context, st *instance.State, g *golden.Golden, peer api.Peer) (engine.Engine, error) {
	d.mu.Lock()
	for _, e := range d.pools {
		if e.golden.Key == st.Key {
			d.mu.Unlock()
			return e.eng, nil
		}
	}
	d.mu.Unlock()
	if st.Recipe == "" {
		return nil, errs.Invalid("instance %s does not record its recipe: reset it with `sudo dbfork reset -f RECIPE %s`", st.ID, st.ID)
	}
	ctx = d.asCaller(ctx, peer)
	r, err := loadRecipe(ctx, st.Recipe)
	if err != nil {
		return nil, err
	}
	eng, err := d.engineFor(ctx, r)
	if err != nil {
		return nil, err
	}
	if v, err := eng.Version(ctx); err != nil || v != g.Manifest.EngineVersion {
		return nil, errs.Invalid("recipe %s now runs %s %s, but instance %s is a clone of a %s golden: take it down and `up` again", st.Recipe, eng.Name(), v, st.ID, g.Manifest.EngineVersion)
	}
	return eng, nil
}
