package bench

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Workload is the steady-state figure of one clone: single-row updates of
// random rows of the largest table from a few clients for a while.
type Workload struct {
	Seconds float64 `json:"seconds"`
	Clients int     `json:"clients"`
	Ops     int     `json:"ops"`
	TPS     float64 `json:"tps"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
	// PrivateBytes is what the clone owns once the workload is done: the
	// cost of copy-on-write granularity (copy-up, XFS cowextsize).
	PrivateBytes int64 `json:"private_bytes,omitempty"`
}

// runWorkload updates random rows of the database url names for d with
// clients connections, each
// statement its own transaction (autocommit), and reports throughput and
// the latency tail. Reads hit the whole table, so a clone whose pages are
// not cached yet (or must still be copied up) shows it here.
func runWorkload(ctx context.Context, ds *Dataset, url string, env map[string]string, d time.Duration, clients int) (*Workload, error) {
	kit, err := kitOf(ds.Engine)
	if err != nil {
		return nil, err
	}
	stmt := kit.Update(ds.Table)
	pool, err := kit.OpenDB(url, env)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	pool.SetMaxOpenConns(clients)
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var lats []float64
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Conn(ctx)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			defer conn.Close()
			var mine []float64
			for wctx.Err() == nil {
				id := 1 + rand.Int64N(max(1, ds.Rows))
				t := time.Now()
				if _, err := conn.ExecContext(ctx, stmt, id); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mine = append(mine, ms(time.Since(t)))
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	secs := time.Since(t0).Seconds()
	return &Workload{Seconds: secs, Clients: clients, Ops: len(lats), TPS: float64(len(lats)) / secs,
		P99Ms: Quantile(lats, 0.99), MaxMs: Quantile(lats, 1)}, nil
}
