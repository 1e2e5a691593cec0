// Package bench measures what users choose dbfork for. pool.go: how long
// clients wait for a lease from a warm pool.
package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/api"
)

// PoolResult is one scenario: Clients clients doing Cycles
// acquire/write/release cycles each.
type PoolResult struct {
	Clients   int     `json:"clients"`
	Cycles    int     `json:"cycles"`
	Acquires  int     `json:"acquires"`
	P50Ms     float64 `json:"acquire_p50_ms"`
	P99Ms     float64 `json:"acquire_p99_ms"`
	MaxMs     float64 `json:"acquire_max_ms"`
	MeanMs    float64 `json:"acquire_mean_ms"`
	WriteP50  float64 `json:"write_p50_ms"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"cycles_per_second"`
	Isolated  bool    `json:"isolated"`           // no client ever saw another's row
	ThinkMs   float64 `json:"think_ms,omitempty"` // each cycle's own work after its write
	// ReadySteps: p50 of where making the leased instances' time went
	// (off the client's path: a warm pool made them ahead), and how many
	// were recycled from released ones rather than cloned.
	ReadySteps map[string]float64 `json:"ready_steps_p50_ms,omitempty"`
	Recycled   int                `json:"recycled,omitempty"`
}

// Pool runs one scenario against a daemon. Each cycle acquires a lease,
// writes one row tagged with the client and cycle, checks that its
// database holds no other tagged row, spends think on the data (a test's
// own work; 0: none), and releases the lease.
func Pool(ctx context.Context, c *api.Client, req api.AcquireRequest, clients, cycles int, think time.Duration) (*PoolResult, error) {
	var mu sync.Mutex
	var acq, wr []float64
	steps := map[string][]float64{}
	recycled := 0
	isolated := true
	var firstErr error
	t0 := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < cycles; j++ {
				t := time.Now()
				l, err := c.Acquire(ctx, req)
				a := ms(time.Since(t))
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				t = time.Now()
				others, err := write(ctx, l, fmt.Sprintf("c%d-%d", i, j))
				w := ms(time.Since(t))
				if err == nil {
					err = thinkFor(ctx, think)
				}
				rerr := c.Release(ctx, l.ID)
				mu.Lock()
				acq, wr = append(acq, a), append(wr, w)
				for k, v := range l.ReadySteps {
					steps[k] = append(steps[k], v)
				}
				if _, ok := l.ReadySteps["stop"]; ok { // made from a released one
					recycled++
				}
				if others > 0 {
					isolated = false
				}
				for _, e := range []error{err, rerr} {
					if e != nil && firstErr == nil {
						firstErr = e
					}
				}
				mu.Unlock()
				if err != nil || rerr != nil {
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
	r := &PoolResult{Clients: clients, Cycles: cycles, Acquires: len(acq), P50Ms: Quantile(acq, 0.5),
		P99Ms: Quantile(acq, 0.99), MaxMs: Quantile(acq, 1), MeanMs: mean(acq), WriteP50: Quantile(wr, 0.5),
		Seconds: secs, PerSecond: float64(len(acq)) / secs, Isolated: isolated, Recycled: recycled, ThinkMs: ms(think)}
	if len(steps) > 0 {
		r.ReadySteps = map[string]float64{}
		for k, v := range steps {
			r.ReadySteps[k] = Quantile(v, 0.5)
		}
	}
	return r, nil
}

// thinkFor stands for a test's own work on its data between the write
// and the end of the cycle.
func thinkFor(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// write inserts a tagged row and counts tagged rows from anyone else.
func write(ctx context.Context, l *api.Lease, tag string) (int, error) {
	kit, err := kitOf(l.Engine)
	if err != nil {
		return 0, err
	}
	db, err := kit.OpenDB(l.DSN, l.Env)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	// The bench's datasets hold the table (a test's cycle is one INSERT
	// and one SELECT, not DDL, which would rewrite a dozen catalog files
	// per cycle); goldens built before they did get it here.
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS dbfork_bench (tag varchar(64) NOT NULL)"); err != nil {
		return 0, fmt.Errorf("lease %s: %w", l.ID, err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO dbfork_bench (tag) VALUES ('"+tag+"')"); err != nil {
		return 0, fmt.Errorf("lease %s: %w", l.ID, err)
	}
	var others int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM dbfork_bench WHERE tag <> '"+tag+"'").Scan(&others); err != nil {
		return 0, fmt.Errorf("lease %s: %w", l.ID, err)
	}
	return others, nil
}

// Quantile returns the q-quantile (0..1) of xs by nearest rank.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(q*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
