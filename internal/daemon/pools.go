package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/pool"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// entryFor finds or makes the pool for a golden, backend and settings, and
// retires pools the same recipe filled with an older golden.
// autoMax says max came from neither the recipe nor the request (the
// pool grows past it: growForLease).
func (d *Daemon) entryFor(r *recipe.Recipe, eng engine.Engine, g *golden.Golden, backendName string, cfg pool.Config, autoMax bool) (*entry, error) {
	id := poolID(g.Key, backendName, r.Settings)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, pool.ErrClosed
	}
	if e, ok := d.pools[id]; ok {
		if autoMax && e.autoMax {
			cfg.Max = max(cfg.Max, e.pool.Stats().Max) // what it grew to stays
			cfg.Min = min(cfg.Min, cfg.Max)
		}
		e.autoMax, e.aheadSet = autoMax, r.Pool.Ahead
		cfg.Ahead = d.fitAhead(e, e.eng.Name(), e.backend, g, cfg, r.Pool.Ahead)
		if err := d.resize(e, cfg); err != nil {
			return nil, err
		}
		e.lastUsed = time.Now()
		return e, nil
	}
	d.retireOlder(r.Path, backendName)
	cfg.Ahead = d.fitAhead(nil, eng.Name(), backendName, g, cfg, r.Pool.Ahead)
	if err := d.checkCapacity(nil, eng.Name(), backendName, g.Manifest.TotalBytes, cfg.Max+cfg.Ahead); err != nil {
		return nil, err
	}
	// A golden with slots is not read ahead: each of its 1+N copies of
	// the database serves one test per instance, so reading them all
	// (Linux caches reflinked files apart) costs N+1 times the golden
	// for pages one test may read once; on a 1 GB golden with 32 slots
	// that was 33 GB per instance, made while the tests ran.
	e := &entry{id: id, recipe: r.Path, backend: backendName, eng: eng, golden: g, settings: r.Settings,
		prewarm: r.Pool.Prewarm && len(g.Manifest.Slots) == 0, hot: r.Pool.Hot, lastUsed: time.Now(),
		autoMax: autoMax, aheadSet: r.Pool.Ahead}
	p, err := pool.New(cfg, d.factory(e))
	if err != nil {
		return nil, errs.Invalid("%w", err)
	}
	e.pool = p
	e.live.Store(p)
	d.pools[id] = e
	d.o.Log.Info("new pool", "pool", id, "golden", golden.Short(g.Key), "backend", backendName, "min", cfg.Min, "max", cfg.Max)
	return e, nil
}

// aheadFor is how many instances past max a pool of g may hold for its
// leases' next instances: a lease of a golden with slots takes its next
// one while its tests use the last slots of the current one (freshahead.go),
// so 8 test workers with the default max of 8 would otherwise find no room
// for any and reset in place on their tests' time, each 33rd test. One
// per lease, as max bounds the leases, unless the recipe's [pool] ahead
// says otherwise (set: that many; -1: unset).
func aheadFor(g *golden.Golden, max, set int) int {
	if len(g.Manifest.Slots) == 0 {
		return 0
	}
	if set >= 0 {
		return set
	}
	return max
}

// fitAhead is aheadFor(g, cfg.Max, set), halved until max + ahead
// instances fit the machine (checkCapacity) or it is 0: the next
// instances only save resets, so a machine without room for them gets
// fewer rather than a refused pool. d.mu is held.
func (d *Daemon) fitAhead(self *entry, engineName, backendName string, g *golden.Golden, cfg pool.Config, set int) int {
	return aheadThatFits(aheadFor(g, cfg.Max, set), func(n int) bool {
		return d.checkCapacity(self, engineName, backendName, g.Manifest.TotalBytes, cfg.Max+n) == nil
	})
}

// aheadThatFits halves ahead until fits(ahead) or it is 0.
func aheadThatFits(ahead int, fits func(int) bool) int {
	for ahead > 0 && !fits(ahead) {
		ahead /= 2
	}
	return ahead
}

// growForLease raises the max of a pool whose max nobody set to the
// leases asked for at once (those out, the callers waiting and this one),
// so the callers beyond the default (pytest -n 16 against the default max
// of 8) get instances instead of waiting for other workers to end their
// sessions; as far as the machine's memory and disk allow (checkCapacity:
// one more at least, else none), and autoMaxCeiling.
func (d *Daemon) growForLease(e *entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !e.autoMax || e.retired {
		return
	}
	st := e.pool.Stats()
	want := min(st.Plain+st.Waiting-st.AheadWait+1, autoMaxCeiling())
	for ; want > st.Max; want = st.Max + (want-st.Max)/2 {
		cfg := pool.Config{Min: st.Min, Max: want, Backoff: d.o.Backoff}
		cfg.Ahead = d.fitAhead(e, e.eng.Name(), e.backend, e.golden, cfg, e.aheadSet)
		if d.checkCapacity(e, e.eng.Name(), e.backend, e.golden.Manifest.TotalBytes, cfg.Max+cfg.Ahead) != nil {
			continue // try fewer; none fit: the caller waits for a release, as with a max set
		}
		if err := e.pool.Resize(cfg); err == nil {
			d.o.Log.Info("pool grown past its default max for the leases asked for", "pool", e.id, "max", cfg.Max)
		}
		return
	}
}

// autoMaxCeiling bounds growForLease: the default max and two leases per
// core (more cannot all run at once, and leases a script leaks until
// their TTL would otherwise hold instances up to the memory limit).
func autoMaxCeiling() int {
	return min(recipe.DefaultPoolMax+2*runtime.NumCPU(), recipe.MaxPoolSize)
}

// resize gives an existing pool the sizes a request asks for (checking
// capacity when it grows) and takes it out of retirement. d.mu is held.
func (d *Daemon) resize(e *entry, cfg pool.Config) error {
	e.retired = false
	st := e.pool.Stats()
	if st.Min == cfg.Min && st.Max == cfg.Max && st.Ahead == cfg.Ahead {
		return nil
	}
	if cfg.Max+cfg.Ahead > st.Max+st.Ahead {
		if err := d.checkCapacity(e, e.eng.Name(), e.backend, e.golden.Manifest.TotalBytes, cfg.Max+cfg.Ahead); err != nil {
			return err
		}
	}
	return e.pool.Resize(cfg)
}

// usedBy records that peer made or leased from e, so that e shows in
// its GET /v1/pools.
func (d *Daemon) usedBy(e *entry, peer api.Peer) {
	if !peer.Unix {
		return // TCP callers hold the token and see every pool anyway
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.users == nil {
		e.users = map[int]bool{}
	}
	e.users[peer.UID] = true
}

// retireOlder drains the pools recipePath filled with an older golden:
// they make no new instances, and close once their leases end. d.mu is
// held.
func (d *Daemon) retireOlder(recipePath, backendName string) {
	for _, old := range d.pools {
		if old.recipe == recipePath && old.backend == backendName && !old.retired {
			d.retire(old, "recipe changed; draining the old pool")
		}
	}
}

// retire drains e: it makes no new instances and closes once its leases
// end (watch). d.mu is held.
func (d *Daemon) retire(e *entry, why string) {
	e.retired = true
	st := e.pool.Stats()
	_ = e.pool.Resize(pool.Config{Min: 0, Max: st.Max, Ahead: st.Ahead, Backoff: d.o.Backoff})
	d.o.Log.Info(why, "pool", e.id, "golden", golden.Short(e.golden.Key))
}

// retireIdle retires the pools no one has used for PoolIdle: their warm
// instances would otherwise hold memory and disk until the daemon exits.
// d.mu is held.
func (d *Daemon) retireIdle(now time.Time) {
	for _, e := range d.pools {
		if e.retired {
			continue
		}
		if st := e.pool.Stats(); st.Leased > 0 || st.Waiting > 0 {
			e.lastUsed = now
		} else if d.o.PoolIdle > 0 && now.Sub(e.lastUsed) > d.o.PoolIdle {
			d.retire(e, "pool unused for "+d.o.PoolIdle.String()+"; closing it")
		}
	}
}

// factory is how e's pool makes, names and destroys its instances.
func (d *Daemon) factory(e *entry) pool.Factory[*instance.Instance] {
	return pool.Factory[*instance.Instance]{
		Create:  func(ctx context.Context) (*instance.Instance, error) { return d.createPooled(ctx, e) },
		Destroy: d.destroyPooled,
		Recycle: func(ctx context.Context, in *instance.Instance) (*instance.Instance, error) {
			return d.recyclePooled(ctx, e, in)
		},
		Recyclable: (*instance.Instance).Recyclable,
		ID:         func(in *instance.Instance) string { return in.State.ID },
		OnError: func(op string, err error) {
			d.o.Log.Error("pool "+op+" failed", "pool", e.id, "err", err)
		},
	}
}

// createPooled makes one instance for e's pool and, unless the recipe
// says prewarm = false, reads it once (copying hot tables up) while it
// waits in the pool.
func (d *Daemon) createPooled(ctx context.Context, e *entry) (*instance.Instance, error) {
	in, err := instance.Create(ctx, d.o.Store, e.eng, e.golden, instance.Options{Backend: d.backendToMake(ctx, e), Settings: e.settings, Recipe: e.recipe, Ahead: true})
	if err != nil {
		return in, err
	}
	if !in.Recyclable() && store.IsDynamicUID(in.State.UID) {
		e.thrown.Add(1) // thrown away for its backend alone
	}
	return d.warm(ctx, e, in, e.prewarm)
}

// reflinkAfter is how many thrown-away instances per place in a pool
// (max + ahead) a pool of a golden with slots makes before it makes
// reflink ones instead (backendToMake).
const reflinkAfter = 4

// backendToMake is the backend for e's next new instance. Auto picks
// OverlayFS on a store that shares extents: one mount, no work per file,
// right for `up` and for an instance a test waits for. A golden with
// slots is where that stops being the cheaper one in a long run:
// PostgreSQL opens every relation file read-write, so each test's first
// connection to a slot copies ~100 catalog files up, on every instance
// again, and a used overlay clone is thrown away. A reflink clone pays
// one FICLONE per file once (~0.4 s of CPU for a 1 GB golden with 32
// slots, 11,300 files) and is restored in place after every lease (the
// few dozen files its server wrote). So, as in renting before buying, a
// pool left to auto makes OverlayFS instances until it has thrown away
// reflinkAfter per place (about what one reflink clone costs more, per
// place), then reflink ones when no client is waiting for the instance.
// A suite of a thousand tests on 8 workers never gets there; 8 × 200
// fresh cycles after that point made 1.4–1.7 times as many per second
// (docs/performance.md, session 22).
func (d *Daemon) backendToMake(ctx context.Context, e *entry) string {
	if e.backend != "auto" || len(e.golden.Manifest.Slots) == 0 {
		return e.backend
	}
	p := e.live.Load()
	if p == nil {
		return e.backend
	}
	if st := p.Stats(); st.Waiting > 0 || e.thrown.Load() < int64(reflinkAfter*(st.Max+st.Ahead)) {
		return e.backend
	}
	if _, _, err := backend.Select(ctx, "reflink", d.o.Store.InstancesDir(), e.golden.DataDir()); err != nil {
		return e.backend
	}
	return "reflink"
}

// warm readies a new instance of e's pool while it waits: with prewarm,
// its clone is read once (hot tables copied up); then its fresh
// databases are made. On error the instance is destroyed.
func (d *Daemon) warm(ctx context.Context, e *entry, in *instance.Instance, prewarm bool) (*instance.Instance, error) {
	var err error
	if !prewarm {
		d.prepareFresh(ctx, e, in)
		return in, nil
	}
	// Read the clone once while it waits in the pool: a fresh
	// reflink/snapshot clone starts with a cold page cache.
	var hot []string
	if hf, ok := e.eng.(engine.HotFiler); ok && len(e.hot) > 0 {
		if hot, err = hf.TableFiles(ctx, in.State.Server, e.hot); err != nil {
			_ = in.Destroy(context.Background(), d.o.Store)
			return nil, fmt.Errorf("[pool] hot: %w", err)
		}
	}
	urgent := func() bool {
		p := e.live.Load()
		return p != nil && p.Stats().Waiting > 0
	}
	pw, err := instance.Prewarm(ctx, in.State, hot, urgent)
	if err != nil {
		_ = in.Destroy(context.Background(), d.o.Store)
		return nil, fmt.Errorf("prewarm instance %s: %w", in.State.ID, err)
	}
	d.o.Log.Debug("prewarmed", "id", in.State.ID, "bytes", pw.Bytes, "ms", pw.Ms, "copied_up", pw.CopiedUp, "cut_short", pw.Cut)
	if pw.Cut {
		// A client is waiting: it gets the instance now, and the rest of
		// the clone is read in the background, at idle priority.
		if _, err := in.WarmInBackground(d.o.Store); err != nil {
			d.o.Log.Warn("clone not read ahead", "id", in.State.ID, "err", err)
		}
	}
	d.prepareFresh(ctx, e, in)
	return in, nil
}

// recyclePooled makes a released instance into a new one for e's pool:
// its clone is restored to the golden (only the files its server changed)
// and handed to a new instance with a new id, uid, password and port
// (instance.Recycle). The page cache stays warm, so there is no prewarm.
// A clone that cannot be restored is destroyed and a new one created.
func (d *Daemon) recyclePooled(ctx context.Context, e *entry, in *instance.Instance) (*instance.Instance, error) {
	d.mu.Lock()
	delete(d.spares, in.State.ID) // its fresh databases go with the restore
	d.walAt.Delete(in.State.ID)
	d.mu.Unlock()
	nin, err := in.Recycle(ctx, d.o.Store, e.eng, e.golden, instance.Options{Backend: e.backend, Settings: e.settings, Recipe: e.recipe, Ahead: true})
	if errors.Is(err, errs.ErrUnsupported) {
		// Not ctx: a pool that closes meanwhile still needs it gone.
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := in.Destroy(dctx, d.o.Store)
		cancel()
		if err != nil {
			return nil, err
		}
		return nil, pool.ErrRecreate
	}
	if errors.Is(err, errs.ErrConflict) {
		return nil, pool.ErrRecreate // not ready (a reset failed): destroyed, as expected
	}
	if err != nil {
		return nil, err
	}
	d.o.Log.Debug("recycled", "from", in.State.ID, "id", nin.State.ID, "ms", nin.State.ReadyMs)
	// A restored clone kept its files and their cached pages; a clone
	// that copies up (OverlayFS) is a new mount whose hot tables must be
	// copied up again.
	return d.warm(ctx, e, nin, e.prewarm && nin.State.Caps().CopiesUp)
}

// destroyPooled stops and removes a pool's instance.
func (d *Daemon) destroyPooled(ctx context.Context, in *instance.Instance) error {
	d.mu.Lock()
	closing := d.closed
	d.mu.Unlock()
	if closing {
		// Shutting down: the pool destroys its instances in
		// parallel, so others may be half-way through.
		faults.At("serve:stopping")
	}
	d.mu.Lock()
	delete(d.spares, in.State.ID)
	d.mu.Unlock()
	d.walAt.Delete(in.State.ID)
	return in.Destroy(ctx, d.o.Store)
}

// poolID names a pool: same golden, backend and settings share one.
func poolID(key, backendName string, settings map[string]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", key, backendName)
	ks := make([]string, 0, len(settings))
	for k := range settings {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Fprintf(h, "%s=%s\x00", k, settings[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Pools implements api.Service.
func (d *Daemon) Pools(peer api.Peer) []api.PoolInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.PoolInfo, 0, len(d.pools))
	for _, e := range d.pools {
		if !peer.All() && !e.users[peer.UID] {
			continue // another user's recipe paths and keys are theirs
		}
		out = append(out, api.PoolInfo{ID: e.id, Recipe: e.recipe, Golden: e.golden.Key, Engine: e.eng.Name(),
			Backend: e.backend, Retired: e.retired, PoolStats: poolStats(e.pool.Stats())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// poolStats copies the pool's counts into the API's own type.
func poolStats(s pool.Stats) api.PoolStats {
	return api.PoolStats{Min: s.Min, Max: s.Max, Ahead: s.Ahead, Warming: s.Warming, Ready: s.Ready, Leased: s.Leased,
		Discarding: s.Discarding, Waiting: s.Waiting, LastError: s.LastError, Closed: s.Closed}
}
