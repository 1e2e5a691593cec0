package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/pool"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/recipe"
)

// Acquire implements api.Service.
func (d *Daemon) Acquire(ctx context.Context, req api.AcquireRequest, peer api.Peer) (*api.Lease, error) {
	t0 := time.Now()
	if err := req.Check(); err != nil {
		return nil, err
	}
	if req.Backend == "" {
		req.Backend = "auto"
	}
	if req.Backend != "auto" && !slices.Contains(backend.Names, req.Backend) {
		return nil, errs.Invalid("unknown backend %q (use auto, %s)", req.Backend, strings.Join(backend.Names, ", "))
	}
	var holder proc.Identity
	if pid := req.PID; pid > 0 || peer.PID > 0 {
		if pid == 0 {
			pid = peer.PID
		}
		id, err := proc.Of(pid)
		if err != nil {
			return nil, errs.Invalid("lease holder pid %d is not a running process", pid)
		}
		if !peer.All() && pid != peer.PID && proc.UID(pid) != peer.UID {
			return nil, errs.Invalid("lease holder pid %d is not a process of yours (uid %d): name one of your own, or leave pid out", pid, peer.UID)
		}
		holder = id
	} else if req.TTLSeconds == 0 {
		return nil, errs.Invalid("a lease needs an end: call over the unix socket, or send \"pid\" (the holder process) or \"ttl_seconds\"")
	}
	r, eng, res, err := d.golden(withStepEnv(ctx, req.Env, peer), req.Recipe, peer)
	if err != nil {
		return nil, err
	}
	cfg := pool.Config{Min: r.Pool.Min, Max: r.Pool.Max, Backoff: d.o.Backoff}
	if req.Min != nil {
		cfg.Min = *req.Min
	}
	if req.Max != nil {
		cfg.Max = *req.Max
	}
	if err := (recipe.Pool{Min: cfg.Min, Max: cfg.Max}).CheckSize(); err != nil {
		return nil, errs.Invalid("%w", err)
	}
	e, err := d.entryFor(r, eng, res.Golden, req.Backend, cfg, !r.Pool.MaxSet && req.Max == nil)
	if err != nil {
		return nil, err
	}
	d.usedBy(e, peer)
	wait := DefaultWait
	if req.WaitSeconds > 0 {
		wait = time.Duration(req.WaitSeconds * float64(time.Second))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		d.growForLease(e)
		in, err := e.pool.Acquire(wctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			st := e.pool.Stats()
			return nil, errs.Busy("no instance of golden %s became free within %s (pool: %d leased, %d warming, max %d); release leases, raise max, or wait longer (wait_seconds)%s",
				golden.Short(e.golden.Key), wait, st.Leased, st.Warming, st.Max, lastErr(st))
		}
		if err != nil {
			return nil, err
		}
		if ctx.Err() != nil { // the caller left while we waited
			_ = e.pool.Release(in.State.ID)
			return nil, ctx.Err()
		}
		if !in.State.Alive() {
			d.o.Log.Warn("pooled server died before its lease; discarding it", "id", in.State.ID)
			_ = e.pool.Release(in.State.ID)
			continue
		}
		return d.lease(e, in, holder, req.TTLSeconds, t0, peer), nil
	}
}

func lastErr(st pool.Stats) string {
	if st.LastError == "" {
		return ""
	}
	return "; last start failure: " + st.LastError
}

func (d *Daemon) lease(e *entry, in *instance.Instance, holder proc.Identity, ttl float64, t0 time.Time, peer api.Peer) *api.Lease {
	st := in.State
	l := &lease{holder: holder, entry: e, owner: -1, in: in}
	l.life, l.cancel = context.WithCancel(context.Background())
	if at, ok := d.walAt.LoadAndDelete(st.ID); ok {
		l.fr.walAt = at.(string) // how the lease can tell it is untouched (freshcall.go)
	}
	if peer.Unix {
		l.owner = peer.UID
	}
	l.Lease = api.Lease{ID: st.ID, Golden: st.Key, Engine: st.Engine, Backend: st.Backend, Fresh: api.FreshReset,
		HolderPID: holder.PID, Leased: time.Now().UTC(), ReadyMs: st.ReadyMs, ReadySteps: st.ReadySteps, Pool: e.id, InstanceDir: st.Dir,
		Env: st.ClientEnv(), Slots: len(e.golden.Manifest.Slots)}
	if st.Conn != nil {
		l.DSN, l.SocketDSN = st.Conn.URL, st.Conn.SocketURL
		l.Env = d.clientEnv(l.Env, peer)
	}
	if ttl > 0 {
		l.expires = time.Now().Add(time.Duration(ttl * float64(time.Second)))
		exp := l.expires.UTC()
		l.ExpiresAt = &exp
	}
	l.AcquireMs = msSince(t0)
	d.mu.Lock()
	d.leases[st.ID] = l
	if sp := d.spares[st.ID]; sp != nil {
		l.spares, l.Fresh = sp, api.FreshDatabase
		go d.refill(l, e.eng.(engine.DatabaseCloner))
		sp.poke()
	}
	d.mu.Unlock()
	d.o.Log.Info("leased", "id", st.ID, "pool", e.id, "holder", holder.PID, "ms", l.AcquireMs)
	out := l.Lease
	return &out
}

// take removes a lease from the table.
func (d *Daemon) take(id string, peer api.Peer) (*lease, error) {
	if !instance.ValidID(id) {
		return nil, errs.Invalid("lease id %q is not an instance id (8 hex digits)", id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.leases[id]
	if !ok || !peer.Owns(l.owner) { // another user's lease is not there for you
		return nil, errs.NotFound("no lease %s (already released, reclaimed, or never leased here)", id)
	}
	delete(d.leases, id)
	return l, nil
}

// everyone is the daemon itself ending a lease (watcher, shutdown).
var everyone = api.Peer{}

// Release implements api.Service.
func (d *Daemon) Release(id string, peer api.Peer) error {
	l, err := d.take(id, peer)
	if err != nil {
		return err
	}
	d.o.Log.Info("released", "id", id)
	l.cancel() // a reset or database call under way stops
	l.op.Lock()
	defer l.op.Unlock()
	return d.discard(l)
}

// discard hands a taken lease's instance back to the pool, which destroys
// it in the background. The caller holds l.op.
func (d *Daemon) discard(l *lease) error {
	l.dropNext() // a replacement made ready ahead goes too
	if err := l.entry.pool.Release(l.in.State.ID); err != nil && !errors.Is(err, pool.ErrClosed) {
		return err
	}
	return nil
}

// Keep implements api.Service: the instance leaves the pool and lives on
// until `dbfork down`, like one made by `dbfork up`.
func (d *Daemon) Keep(id string, peer api.Peer) (*api.Lease, error) {
	l, err := d.take(id, peer)
	if err != nil {
		return nil, err
	}
	l.op.Lock() // a reset under way finishes first
	defer l.op.Unlock()
	l.cancel()
	if l.in.State.Status != instance.StatusReady {
		_ = d.discard(l)
		return nil, fmt.Errorf("keep lease %s: its instance is %s (a reset failed); it is being removed", id, l.in.State.Status)
	}
	l.dropNext()
	in, err := l.entry.pool.Forget(l.in.State.ID) // the lease's id unless it was replaced (freshahead.go)
	if err != nil {
		return nil, errs.NotFound("lease %s: %w", id, err)
	}
	owner := l.owner // the daemon does `down` and `reset` for them (kept.go)
	in.State.Owner = &owner
	if err := in.Detach(); err != nil {
		_ = in.Destroy(context.Background(), d.o.Store)
		return nil, fmt.Errorf("keep instance %s: %w", id, err)
	}
	in.Release()
	d.o.Log.Info("kept", "id", id)
	out := l.Lease
	out.Kept, out.HolderPID, out.ExpiresAt = true, 0, nil
	out.ID = in.State.ID
	return &out, nil
}

// Leases implements api.Service.
func (d *Daemon) Leases(peer api.Peer) []api.Lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.Lease, 0, len(d.leases))
	for _, l := range d.leases {
		if !peer.Owns(l.owner) {
			continue
		}
		out = append(out, l.Lease)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Leased.Before(out[j].Leased) })
	return out
}

// watch reclaims leases whose holder exited or whose TTL passed, and
// closes drained retired pools.
func (d *Daemon) watch() {
	defer close(d.done)
	t := time.NewTicker(d.o.Watch)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var dead []string
		var drained []*entry
		d.mu.Lock()
		for id, l := range d.leases {
			if (l.holder.PID > 0 && !l.holder.Alive()) || (!l.expires.IsZero() && now.After(l.expires)) {
				dead = append(dead, id)
			}
		}
		d.retireIdle(now)
		for id, e := range d.pools {
			if st := e.pool.Stats(); e.retired && st.Leased == 0 && st.Warming == 0 && st.Ready == 0 {
				delete(d.pools, id)
				d.drained = append(d.drained, e)
				drained = append(drained, e)
			}
		}
		d.mu.Unlock()
		for _, id := range dead {
			d.o.Log.Info("reclaiming lease: holder exited or TTL passed", "id", id)
			_ = d.Release(id, everyone)
		}
		for _, e := range drained {
			go func() { _ = e.pool.Close(context.Background()) }()
		}
	}
}

// clientEnv adjusts a connection environment for the caller: the
// instance's socket dir belongs to its server's uid (mode 0700), so a
// caller who is not root connects over 127.0.0.1 with the instance
// password instead.
func (d *Daemon) clientEnv(env map[string]string, peer api.Peer) map[string]string {
	out := make(map[string]string, len(env)+1)
	for k, v := range env {
		out[k] = v
	}
	// Rootless, the daemon's own user is the server user; as root each
	// instance has a uid of its own, and only root takes the socket.
	if !(peer.Unix && (peer.UID == 0 || peer.UID == os.Geteuid())) {
		engine.TCPOnly(out)
	}
	return out
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
