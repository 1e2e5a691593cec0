package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
)

// Modes of Fresh.
const (
	ModeDatabase = api.FreshDatabase // a database cloned inside the leased server per cycle
	ModeReset    = api.FreshReset    // the lease reset in place per cycle
	ModeFresh    = "fresh"           // POST /v1/leases/{id}/fresh per cycle: the daemon picks (slot first)
)

// FreshResult is one scenario of Fresh: the PoolResult figures, where
// "acquire" is the call that makes the data fresh (create database or
// reset), plus where a reset's time went (median ms per step, as the
// daemon measured them) and how many databases had to be cloned while the
// client waited (none ready ahead).
type FreshResult struct {
	PoolResult
	Mode       string             `json:"mode"`
	Steps      map[string]float64 `json:"reset_steps_p50_ms,omitempty"`
	ServerP50  float64            `json:"daemon_p50_ms"` // inside the daemon
	ServerP99  float64            `json:"daemon_p99_ms"`
	OnDemand   int                `json:"cloned_on_demand,omitempty"`
	LeaseFresh string             `json:"lease_fresh"`
	Modes      map[string]int     `json:"modes,omitempty"` // ModeFresh: cycles per mode the daemon chose
	// FloorP50/P99: a no-op call to the daemon timed by the same clients
	// before each fresh call (FreshOptions.Floor): the least any answer
	// of the daemon waits at this load, whatever the call does.
	FloorP50 float64 `json:"floor_p50_ms,omitempty"`
	FloorP99 float64 `json:"floor_p99_ms,omitempty"`
}

// FreshOptions are a Fresh scenario's knobs besides mode and sizes.
type FreshOptions struct {
	Think time.Duration // each cycle's own work after the write
	Floor bool          // time a no-op daemon call before each fresh call
}

// Fresh runs one scenario: each client holds one lease for the whole run
// and repeats: make the data fresh (mode), write one tagged row, check that
// no earlier row is visible (the data really is the golden's), spend
// think on it (a test's own work), and, for databases, drop the database.
func Fresh(ctx context.Context, c *api.Client, req api.AcquireRequest, mode string, clients, cycles int, o FreshOptions) (*FreshResult, error) {
	think := o.Think
	leases := make([]*api.Lease, clients)
	for i := range leases {
		l, err := c.Acquire(ctx, req)
		if err != nil {
			return nil, err
		}
		defer func() { _ = c.Release(context.Background(), l.ID) }()
		if mode == ModeDatabase && l.Fresh != api.FreshDatabase {
			return nil, fmt.Errorf("lease %s hands out no fresh databases (fresh = %q): that needs PostgreSQL 18 or later on a store that shares extents", l.ID, l.Fresh)
		}
		leases[i] = l
	}
	// The clock starts once the pool has made up for the leases taken:
	// the figures are those of a session under way, not of its first
	// second, when the pool makes its reserve again beside the tests.
	if err := settled(ctx, c, leases[0].Pool); err != nil {
		return nil, err
	}
	run := &freshRun{c: c, mode: mode, think: think, floor: o.Floor, steps: map[string][]float64{}, isolated: true, modes: map[string]int{}}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				if err := run.cycle(ctx, leases[i], fmt.Sprintf("c%d-%d", i, j)); err != nil {
					run.fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if run.firstErr != nil {
		return nil, run.firstErr
	}
	secs := time.Since(t0).Seconds()
	lat, wr := run.lat, run.wr
	r := &FreshResult{Mode: mode, LeaseFresh: leases[0].Fresh, ServerP50: Quantile(run.srv, 0.5), ServerP99: Quantile(run.srv, 0.99), OnDemand: run.onDemand,
		PoolResult: PoolResult{Clients: clients, Cycles: cycles, Acquires: len(lat), P50Ms: Quantile(lat, 0.5),
			P99Ms: Quantile(lat, 0.99), MaxMs: Quantile(lat, 1), MeanMs: mean(lat), WriteP50: Quantile(wr, 0.5),
			Seconds: secs, PerSecond: float64(len(lat)) / secs, Isolated: run.isolated, ThinkMs: ms(think)}}
	if len(run.modes) > 0 {
		r.Modes = run.modes
	}
	if len(run.noop) > 0 {
		r.FloorP50, r.FloorP99 = Quantile(run.noop, 0.5), Quantile(run.noop, 0.99)
	}
	if len(run.steps) > 0 {
		r.Steps = map[string]float64{}
		for k, v := range run.steps {
			r.Steps[k] = Quantile(v, 0.5)
		}
	}
	return r, nil
}

// freshRun collects what the clients of one Fresh scenario measure.
type freshRun struct {
	c     *api.Client
	mode  string
	think time.Duration
	floor bool

	mu           sync.Mutex
	lat, wr, srv []float64
	noop         []float64 // floor: the no-op calls' times
	steps        map[string][]float64
	isolated     bool
	onDemand     int
	modes        map[string]int
	firstErr     error
}

func (run *freshRun) fail(err error) {
	run.mu.Lock()
	if run.firstErr == nil {
		run.firstErr = err
	}
	run.mu.Unlock()
}

// cycle makes l's data fresh, writes a row tagged tag and checks no other
// client's row is visible, then drops a fresh database.
func (run *freshRun) cycle(ctx context.Context, l *api.Lease, tag string) error {
	if run.floor {
		t := time.Now()
		if _, err := run.c.Health(ctx); err != nil {
			return err
		}
		run.mu.Lock()
		run.noop = append(run.noop, ms(time.Since(t)))
		run.mu.Unlock()
	}
	t := time.Now()
	target, dbName, inside, err := run.makeFresh(ctx, l)
	if err != nil {
		return err
	}
	a := ms(time.Since(t))
	t = time.Now()
	others, err := write(ctx, &target, tag)
	w := ms(time.Since(t))
	if err == nil {
		err = thinkFor(ctx, run.think)
	}
	if err == nil && dbName != "" {
		err = run.c.DropDatabase(ctx, l.ID, dbName)
	}
	run.mu.Lock()
	run.lat, run.wr, run.srv = append(run.lat, a), append(run.wr, w), append(run.srv, inside)
	if others > 0 {
		run.isolated = false
	}
	run.mu.Unlock()
	return err
}

// makeFresh creates a fresh database in l's server, or resets l: target
// is how to reach the fresh data, inside the daemon's own time for it.
func (run *freshRun) makeFresh(ctx context.Context, l *api.Lease) (target api.Lease, dbName string, inside float64, err error) {
	target = *l
	if run.mode == ModeFresh {
		fd, err := run.c.Fresh(ctx, l.ID)
		if err != nil {
			return target, "", 0, err
		}
		target.DSN, target.Env = fd.DSN, fd.Env
		run.mu.Lock()
		run.modes[fd.Mode]++
		run.mu.Unlock()
		return target, "", fd.Ms, nil // the daemon retires it on the next call
	}
	if run.mode == ModeDatabase {
		db, err := run.c.CreateDatabase(ctx, l.ID)
		if err != nil {
			return target, "", 0, err
		}
		target.DSN, target.Env = db.DSN, db.Env
		if db.OnDemand {
			run.mu.Lock()
			run.onDemand++
			run.mu.Unlock()
		}
		return target, db.Name, db.Ms, nil
	}
	r, err := run.c.Reset(ctx, l.ID)
	if err != nil {
		return target, "", 0, err
	}
	run.mu.Lock()
	for k, v := range r.ResetSteps {
		run.steps[k] = append(run.steps[k], v)
	}
	run.mu.Unlock()
	return *r, "", r.ResetMs, nil
}

// StepNames lists a result's reset steps in a stable order.
func (r *FreshResult) StepNames() []string {
	var out []string
	for k := range r.Steps {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// settled waits until pool id has nothing warming or being removed and
// its reserve ready, as far as its max leaves room for one (or it is
// backing off after failed starts: the clients will say).
func settled(ctx context.Context, c *api.Client, id string) error {
	return WaitPool(ctx, c, id, "settle", func(p api.PoolInfo) bool {
		if p.Warming > 0 || p.Discarding > 0 {
			return false
		}
		return p.Ready >= min(p.Min, p.Max-p.Leased) || p.LastError != ""
	})
}

// WaitPool polls the daemon until pool id satisfies ok, for at most 5
// minutes; what names the wait in the error.
func WaitPool(ctx context.Context, c *api.Client, id, what string, ok func(api.PoolInfo) bool) error {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		ps, err := c.Pools(ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.ID == id && ok(p) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errs.Busy("pool %s did not %s within 5 minutes", id, what)
}
