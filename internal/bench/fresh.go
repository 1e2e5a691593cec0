package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/api"
)

// Modes of Fresh.
const (
	ModeDatabase = api.FreshDatabase // a database cloned inside the leased server per cycle
	ModeReset    = api.FreshReset    // the lease reset in place per cycle
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
	OnDemand   int                `json:"cloned_on_demand,omitempty"`
	LeaseFresh string             `json:"lease_fresh"`
}

// Fresh runs one scenario: each client holds one lease for the whole run
// and repeats: make the data fresh (mode), write one tagged row, check that
// no earlier row is visible (the data really is the golden's), and, for
// databases, drop the database.
func Fresh(ctx context.Context, c *api.Client, req api.AcquireRequest, mode string, clients, cycles int) (*FreshResult, error) {
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
	var mu sync.Mutex
	var lat, wr, srv []float64
	steps := map[string][]float64{}
	isolated, onDemand := true, 0
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := leases[i]
			for j := 0; j < cycles; j++ {
				t := time.Now()
				target, dbName, inside := *l, "", 0.0
				if mode == ModeDatabase {
					db, err := c.CreateDatabase(ctx, l.ID)
					if err != nil {
						fail(err)
						return
					}
					target.DSN, target.Env, dbName, inside = db.DSN, db.Env, db.Name, db.Ms
					if db.OnDemand {
						mu.Lock()
						onDemand++
						mu.Unlock()
					}
				} else {
					r, err := c.Reset(ctx, l.ID)
					if err != nil {
						fail(err)
						return
					}
					target, inside = *r, r.ResetMs
					mu.Lock()
					for k, v := range r.ResetSteps {
						steps[k] = append(steps[k], v)
					}
					mu.Unlock()
				}
				a := ms(time.Since(t))
				t = time.Now()
				others, err := write(ctx, &target, fmt.Sprintf("c%d-%d", i, j))
				w := ms(time.Since(t))
				if err == nil && dbName != "" {
					err = c.DropDatabase(ctx, l.ID, dbName)
				}
				mu.Lock()
				lat, wr, srv = append(lat, a), append(wr, w), append(srv, inside)
				if others > 0 {
					isolated = false
				}
				mu.Unlock()
				if err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	secs := time.Since(t0).Seconds()
	r := &FreshResult{Mode: mode, LeaseFresh: leases[0].Fresh, ServerP50: Quantile(srv, 0.5), OnDemand: onDemand,
		PoolResult: PoolResult{Clients: clients, Cycles: cycles, Acquires: len(lat), P50Ms: Quantile(lat, 0.5),
			P99Ms: Quantile(lat, 0.99), MaxMs: Quantile(lat, 1), MeanMs: mean(lat), WriteP50: Quantile(wr, 0.5),
			Seconds: secs, PerSecond: float64(len(lat)) / secs, Isolated: isolated}}
	if len(steps) > 0 {
		r.Steps = map[string]float64{}
		for k, v := range steps {
			r.Steps[k] = Quantile(v, 0.5)
		}
	}
	return r, nil
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
