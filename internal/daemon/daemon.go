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
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/pool"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// DefaultWait is how long an acquire waits for a free instance.
const DefaultWait = 120 * time.Second

// Options configure a daemon.
type Options struct {
	Store *store.Store
	Log   *slog.Logger
	// OpenEngine locates a recipe's server binaries.
	OpenEngine func(ctx context.Context, w engine.Want) (engine.Engine, error)
	// Remote serves recipes' [cache] (pull instead of build); nil: none.
	Remote golden.Remote
	// Backoff after a failed instance start (default 1 s, doubling).
	Backoff time.Duration
	// Watch is how often lease holders and TTLs are checked (default 100 ms).
	Watch time.Duration
	// PoolIdle closes a pool nobody leased from for this long (default
	// 10 min; negative: never).
	PoolIdle time.Duration
	// Sudo is the user behind `sudo` that started the daemon (nil: none):
	// the recipes of requests with no unix peer (TCP, `serve -f`) run
	// their steps as them.
	Sudo *caller.Caller
	// Urgent: the process is the daemon's own (`serve`), whose scheduling
	// group runs at proc.Urgent while it answers tests (see urgency.go).
	Urgent bool
}

// Daemon implements api.Service.
type Daemon struct {
	o       Options
	started time.Time

	app *project.Project // recipes to goldens: engines, input hashes and goldens kept between calls

	urgMu    sync.Mutex // orders changes of the daemon's priority (urgency.go)
	building int        // builds and pulls under way

	mu      sync.Mutex
	pools   map[string]*entry
	leases  map[string]*lease
	spares  map[string]*spares // by instance id, from warming until destroyed
	walAt   sync.Map           // instance id -> its WAL position once warm (freshcall.go)
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
	live     atomic.Pointer[pool.Pool[*instance.Instance]]
	retired  bool
	lastUsed time.Time // last acquire, or last time watch saw it busy
	// autoMax: neither the recipe nor the last acquire set max, so the
	// pool grows past it while leases are asked for (growForLease).
	// aheadSet is the recipe's [pool] ahead (-1: unset). d.mu guards both.
	autoMax  bool
	aheadSet int

	dbOnce   sync.Once // whether the store shares extents, probed once
	dbShares bool

	// thrown counts the instances its pool made that are thrown away
	// after use for their backend alone (OverlayFS: nothing restores
	// one); backendToMake.
	thrown atomic.Int64

	// queued counts replacements of leases low on slots waiting in the
	// pool's Acquire (freshahead.go), which the pool counts as waiters.
	queued atomic.Int32

	// users are the uids of socket peers that made or leased from it:
	// GET /v1/pools shows it to them (and to root). d.mu guards it.
	users map[int]bool
}

type lease struct {
	api.Lease
	holder  proc.Identity // zero: none (TTL only)
	expires time.Time     // zero: none
	entry   *entry
	owner   int // the caller's uid; -1 over TCP
	in      *instance.Instance
	spares  *spares // fresh databases (Fresh == FreshDatabase)
	fr      freshState

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
	if o.PoolIdle == 0 {
		o.PoolIdle = 10 * time.Minute
	}
	d := &Daemon{o: o, started: time.Now().UTC(),
		pools: map[string]*entry{}, leases: map[string]*lease{}, spares: map[string]*spares{},
		stop: make(chan struct{}), done: make(chan struct{})}
	d.app = project.New(project.Options{Store: o.Store, Open: o.OpenEngine, Build: golden.Options{Log: o.Log, Remote: o.Remote}, Heavy: d.heavy})
	d.setUrgency()
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
