package daemon_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/bench"
)

// BenchmarkAcquire reports acquire latency from a warm PostgreSQL pool
// with 1, 4 and 8 clients doing acquire/write/release cycles (b.N cycles
// in all per scenario):
//
//	go test -run '^$' -bench Acquire -benchtime 50x ./internal/daemon
func BenchmarkAcquire(b *testing.B) {
	w := newWorld(b, "")
	outer := testing.TB(b)
	for _, n := range []int{1, 4, 8} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			lo, hi := n, 2*n
			l, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe, Min: &lo, Max: &hi})
			if err != nil {
				b.Fatal(err)
			}
			_ = w.c.Release(context.Background(), l.ID)
			w.t = b
			defer func() { w.t = outer }()
			w.waitPool("warm", func(p api.PoolInfo) bool { return p.Ready >= lo && p.Discarding == 0 })
			b.ResetTimer()
			r, err := bench.Pool(context.Background(), w.c, api.AcquireRequest{Recipe: w.recipe, Min: &lo, Max: &hi}, n, max(1, b.N/n), 0)
			if err != nil {
				b.Fatal(err)
			}
			if !r.Isolated {
				b.Fatal("a client saw another client's row")
			}
			b.ReportMetric(r.P50Ms, "p50-ms")
			b.ReportMetric(r.P99Ms, "p99-ms")
			b.ReportMetric(r.PerSecond, "cycles/s")
		})
	}
}
