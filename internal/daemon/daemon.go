// Package daemon is what `dbfork serve` runs: one warm pool per golden
// (and backend and settings), leases that die with their holder, and the
// api.Service the HTTP API exposes.
//
// Every pooled instance is an ordinary instance (internal/instance) whose
// lock the daemon holds, so `dbfork down` refuses it while it is pooled,
// and after a kill -9 of the daemon `dbfork gc` reaps it like any other
// leftover of a crashed process.
package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/pool"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// DefaultWait is how long an acquire waits for a free instance.
const DefaultWait = 120 * time.Second

// Options configure a daemon.
type Options struct {
	Store *store.Store
	Log   *slog.Logger
	// OpenEngine locates a recipe's server binaries.
	OpenEngine func(ctx context.Context, r *recipe.Recipe) (engine.Engine, error)
	// Remote serves recipes' [cache] (pull instead of build); nil: none.
	Remote golden.Remote
	// Backoff after a failed instance start (default 1 s, doubling).
	Backoff time.Duration
	// Watch is how often lease holders and TTLs are checked (default 100 ms).
	Watch time.Duration
}

// Daemon implements api.Service.
type Daemon struct {
	o       Options
	started time.Time

	hc *golden.HashCache // input hashes, kept in memory between calls

	mu      sync.Mutex
	goldens map[string]*golden.Golden // published goldens by key
	engines map[string]engine.Engine
	pools   map[string]*entry
	leases  map[string]*lease
	spares  map[string]*spares // by instance id, from warming until destroyed
	drained []*entry           // retired pools taken out of pools, closing
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// entry is one pool and what its instances are made from.
type entry struct {
	id       string
	recipe   string // absolute path of the recipe
	backend  string
	eng      engine.Engine
	golden   *golden.Golden
	settings map[string]string
	prewarm  bool
	hot      []string // tables to copy up before a lease
	pool     *pool.Pool[*instance.Instance]
	// live is pool for the pool's own callbacks, which may run before
	// pool.New has returned.
	live    atomic.Pointer[pool.Pool[*instance.Instance]]
	retired bool

	dbOnce   sync.Once // whether the store shares extents, probed once
	dbShares bool
}

type lease struct {
	api.Lease
	holder  proc.Identity // zero: none (TTL only)
	expires time.Time     // zero: none
	entry   *entry
	owner   int // the caller's uid; -1 over TCP
	in      *instance.Instance
	spares  *spares // fresh databases (Fresh == FreshDatabase)

	// op serialises what changes the instance under a lease (reset,
	// fresh databases) against its end; life ends with the lease and
	// cancels whatever such call is running.
	op     sync.Mutex
	life   context.Context
	cancel context.CancelFunc
}

// New starts a daemon (its lease watcher); Close stops it.
func New(o Options) *Daemon {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Watch <= 0 {
		o.Watch = 100 * time.Millisecond
	}
	d := &Daemon{o: o, started: time.Now().UTC(), engines: map[string]engine.Engine{},
		hc: golden.OpenHashCache(filepath.Join(o.Store.CacheDir(), "hashes.json")), goldens: map[string]*golden.Golden{},
		pools: map[string]*entry{}, leases: map[string]*lease{}, spares: map[string]*spares{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go d.watch()
	return d
}

// Health implements api.Service.
func (d *Daemon) Health() api.Health {
	d.mu.Lock()
	defer d.mu.Unlock()
	return api.Health{Status: "ok", PID: os.Getpid(), Store: d.o.Store.Root, Started: d.started,
		Pools: len(d.pools), Leases: len(d.leases)}
}

// loadRecipe reads the recipe a request names. Paths must be absolute: the
// daemon's working directory means nothing to the caller.
// loadRecipe reads a recipe with the rights of whoever asked (ctx's
// caller), and checks they may read every input: the daemon is root, the
// caller may not be.
func loadRecipe(ctx context.Context, path string) (*recipe.Recipe, error) {
	if path == "" {
		return nil, errs.Invalid("request needs \"recipe\": the absolute path of a dbfork.toml")
	}
	if !filepath.IsAbs(path) {
		return nil, errs.Invalid("recipe path %q is relative: send an absolute path", path)
	}
	if engine.CallerOf(ctx) == nil {
		return recipe.Load(path)
	}
	data, err := engine.ReadAsCaller(ctx, path)
	if err != nil {
		return nil, errs.NotFound("recipe %v", err)
	}
	r, err := recipe.Parse(path, data)
	if err != nil {
		return nil, err
	}
	var inputs []string
	for _, st := range r.Steps {
		inputs = append(inputs, st.Files...)
	}
	if err := engine.CallerCanRead(ctx, inputs); err != nil {
		return nil, errs.Invalid("%v", err)
	}
	return r, nil
}

// engineFor returns the (cached) engine for a recipe.
func (d *Daemon) engineFor(ctx context.Context, r *recipe.Recipe) (engine.Engine, error) {
	k := r.Engine + "\x00" + r.Bindir + "\x00" + r.Version
	d.mu.Lock()
	eng, ok := d.engines[k]
	d.mu.Unlock()
	if ok {
		return eng, nil
	}
	eng, err := d.o.OpenEngine(ctx, r)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.engines[k] = eng
	d.mu.Unlock()
	return eng, nil
}

// golden builds or finds the recipe's golden. The key is recomputed on
// every call (a stat per input, through the hash cache), so an edited seed
// file is picked up by the next acquire; a golden already seen is not
// re-read from disk.
func (d *Daemon) golden(ctx context.Context, path string) (*recipe.Recipe, engine.Engine, *golden.Result, error) {
	ctx = d.asCaller(ctx)
	r, err := loadRecipe(ctx, path)
	if err != nil {
		return nil, nil, nil, err
	}
	eng, err := d.engineFor(ctx, r)
	if err != nil {
		return nil, nil, nil, err
	}
	key, inputs, version, err := golden.Key(ctx, eng, r, d.hc)
	if err != nil {
		return nil, nil, nil, err
	}
	d.mu.Lock()
	g, ok := d.goldens[key]
	d.mu.Unlock()
	if ok {
		if _, err := os.Stat(filepath.Join(g.Dir, golden.ManifestName)); err == nil {
			return r, eng, &golden.Result{Golden: g}, nil
		}
	}
	res, err := golden.BuildKeyed(ctx, d.o.Store, eng, r,
		golden.Keyed{Key: key, Inputs: inputs, Version: version}, golden.Options{Log: d.o.Log, Remote: d.o.Remote})
	if err != nil {
		return nil, nil, nil, err
	}
	d.hc.Save()
	d.mu.Lock()
	d.goldens[res.Golden.Key] = res.Golden
	d.mu.Unlock()
	return r, eng, res, nil
}

// asCaller makes a build's `run` steps run as whoever asked: the peer of
// a unix-socket request, else (TCP, `serve -f`) the user behind `sudo`.
func (d *Daemon) asCaller(ctx context.Context) context.Context {
	if p, ok := api.PeerFrom(ctx); ok && p.Unix && p.UID >= 0 && p.GID >= 0 {
		return engine.WithCaller(ctx, func() *engine.Caller { return engine.LookupCaller(p.UID, p.GID) })
	}
	return engine.WithCaller(ctx, engine.SudoCaller)
}

// EnsureGolden implements api.Service.
func (d *Daemon) EnsureGolden(ctx context.Context, req api.GoldenRequest) (*api.Golden, error) {
	t0 := time.Now()
	_, _, res, err := d.golden(ctx, req.Recipe)
	if err != nil {
		return nil, err
	}
	m := res.Golden.Manifest
	return &api.Golden{Key: res.Golden.Key, Engine: m.Engine, Version: m.EngineVersion, Built: res.Built,
		Waited: res.Waited, Ms: msSince(t0)}, nil
}

// Acquire implements api.Service.
func (d *Daemon) Acquire(ctx context.Context, req api.AcquireRequest, peer api.Peer) (*api.Lease, error) {
	t0 := time.Now()
	if err := req.Check(); err != nil {
		return nil, err
	}
	if req.Backend == "" {
		req.Backend = "auto"
	}
	if req.Backend != "auto" && !contains(backend.Names, req.Backend) {
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
	r, eng, res, err := d.golden(ctx, req.Recipe)
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
	e, err := d.entryFor(r, eng, res.Golden, req.Backend, cfg)
	if err != nil {
		return nil, err
	}
	wait := DefaultWait
	if req.WaitSeconds > 0 {
		wait = time.Duration(req.WaitSeconds * float64(time.Second))
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		in, err := e.pool.Acquire(wctx)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			st := e.pool.Stats()
			return nil, errs.Busy("no instance of golden %s became free within %s (pool: %d leased, %d warming, max %d); release leases, raise max, or wait longer (wait_seconds)%s",
				short(e.golden.Key), wait, st.Leased, st.Warming, st.Max, lastErr(st))
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
	if peer.Unix {
		l.owner = peer.UID
	}
	l.Lease = api.Lease{ID: st.ID, Golden: st.Key, Engine: st.Engine, Backend: st.Backend, Fresh: api.FreshReset,
		HolderPID: holder.PID, Leased: time.Now().UTC(), ReadyMs: st.ReadyMs, Pool: e.id, InstanceDir: st.Dir,
		Env: st.ClientEnv()}
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

// entryFor finds or makes the pool for a golden, backend and settings, and
// retires pools the same recipe filled with an older golden.
func (d *Daemon) entryFor(r *recipe.Recipe, eng engine.Engine, g *golden.Golden, backendName string, cfg pool.Config) (*entry, error) {
	id := poolID(g.Key, backendName, r.Settings)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, pool.ErrClosed
	}
	if e, ok := d.pools[id]; ok {
		e.retired = false
		if st := e.pool.Stats(); st.Min != cfg.Min || st.Max != cfg.Max {
			if cfg.Max > st.Max {
				if err := d.checkCapacity(eng.Name(), backendName, g.Manifest.TotalBytes, cfg.Max); err != nil {
					return nil, err
				}
			}
			if err := e.pool.Resize(cfg); err != nil {
				return nil, err
			}
		}
		return e, nil
	}
	for _, old := range d.pools {
		if old.recipe == r.Path && old.backend == backendName && !old.retired {
			old.retired = true
			st := old.pool.Stats()
			_ = old.pool.Resize(pool.Config{Min: 0, Max: st.Max, Backoff: d.o.Backoff})
			d.o.Log.Info("recipe changed; draining the old pool", "pool", old.id, "golden", short(old.golden.Key))
		}
	}
	if err := d.checkCapacity(eng.Name(), backendName, g.Manifest.TotalBytes, cfg.Max); err != nil {
		return nil, err
	}
	e := &entry{id: id, recipe: r.Path, backend: backendName, eng: eng, golden: g, settings: r.Settings, prewarm: r.Pool.Prewarm, hot: r.Pool.Hot}
	p, err := pool.New(cfg, pool.Factory[*instance.Instance]{
		Create: func(ctx context.Context) (*instance.Instance, error) {
			in, err := instance.Create(ctx, d.o.Store, e.eng, e.golden, instance.Options{Backend: e.backend, Settings: e.settings, Recipe: e.recipe})
			if err != nil {
				return in, err
			}
			if !e.prewarm {
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
			d.prepareFresh(ctx, e, in)
			return in, nil
		},
		Destroy: func(ctx context.Context, in *instance.Instance) error {
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
			return in.Destroy(ctx, d.o.Store)
		},
		ID: func(in *instance.Instance) string { return in.State.ID },
		OnError: func(op string, err error) {
			d.o.Log.Error("pool "+op+" failed", "pool", e.id, "err", err)
		},
	})
	if err != nil {
		return nil, errs.Invalid("%v", err)
	}
	e.pool = p
	e.live.Store(p)
	d.pools[id] = e
	d.o.Log.Info("new pool", "pool", id, "golden", short(g.Key), "backend", backendName, "min", cfg.Min, "max", cfg.Max)
	return e, nil
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

// take removes a lease from the table.
func (d *Daemon) take(id string, peer api.Peer) (*lease, error) {
	if !validID(id) {
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
	if err := l.entry.pool.Release(l.ID); err != nil && !errors.Is(err, pool.ErrClosed) {
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
	in, err := l.entry.pool.Forget(id)
	if err != nil {
		return nil, errs.NotFound("lease %s: %v", id, err)
	}
	if err := in.Detach(); err != nil {
		_ = in.Destroy(context.Background(), d.o.Store)
		return nil, fmt.Errorf("keep instance %s: %w", id, err)
	}
	in.Release()
	d.o.Log.Info("kept", "id", id)
	out := l.Lease
	out.Kept, out.HolderPID, out.ExpiresAt = true, 0, nil
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

// Pools implements api.Service.
func (d *Daemon) Pools() []api.PoolInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.PoolInfo, 0, len(d.pools))
	for _, e := range d.pools {
		out = append(out, api.PoolInfo{ID: e.id, Recipe: e.recipe, Golden: e.golden.Key, Engine: e.eng.Name(),
			Backend: e.backend, Retired: e.retired, PoolStats: poolStats(e.pool.Stats())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
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

// Warm makes the pool for a recipe exist (building its golden), so its
// instances are warming before the first client asks (`serve -f`).
func (d *Daemon) Warm(ctx context.Context, recipePath, backendName string) (string, error) {
	r, eng, res, err := d.golden(ctx, recipePath)
	if err != nil {
		return "", err
	}
	if backendName == "" {
		backendName = "auto"
	}
	e, err := d.entryFor(r, eng, res.Golden, backendName, pool.Config{Min: r.Pool.Min, Max: r.Pool.Max, Backoff: d.o.Backoff})
	if err != nil {
		return "", err
	}
	return e.id, nil
}

// Close stops every pool: warming starts are cancelled, every instance
// (leased ones too) is stopped and removed. It waits until all are gone
// or ctx ends.
func (d *Daemon) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	entries := make([]*entry, 0, len(d.pools))
	for _, e := range d.pools {
		entries = append(entries, e)
	}
	entries = append(entries, d.drained...)
	leases := d.leases
	d.leases = map[string]*lease{}
	d.mu.Unlock()
	for _, l := range leases {
		// A reset must not start a server on a clone the pool is
		// tearing down.
		l.cancel()
		l.op.Lock()
		l.op.Unlock() //nolint:staticcheck // waiting for it is the point
	}
	close(d.stop)
	<-d.done
	var wg sync.WaitGroup
	errc := make(chan error, len(entries))
	for _, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.pool.Close(ctx); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

func validID(id string) bool {
	return len(id) == 8 && strings.Trim(id, "0123456789abcdef") == ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func short(k string) string {
	if len(k) > 12 {
		return k[:12]
	}
	return k
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
	// Rootless, the daemon's own user is the server user.
	if !(peer.Unix && (peer.UID == 0 || peer.UID == os.Geteuid())) {
		engine.TCPOnly(out)
	}
	return out
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// poolStats copies the pool's counts into the API's own type.
func poolStats(s pool.Stats) api.PoolStats {
	return api.PoolStats{Min: s.Min, Max: s.Max, Warming: s.Warming, Ready: s.Ready, Leased: s.Leased,
		Discarding: s.Discarding, Waiting: s.Waiting, LastError: s.LastError, Closed: s.Closed}
}
