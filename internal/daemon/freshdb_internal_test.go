package daemon

import (
	"fmt"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
)

// The refill loop clones before it drops: a database given back is
// dropped once the spares are full, or once too many wait, a few at a
// time; none of a replaced server is kept.
func TestSparesWorkOrder(t *testing.T) {
	srv := &engine.Server{}
	sp := newSpares()
	sp.server = srv
	sp.ready = []string{"a"}
	for i := 0; i < 6; i++ {
		sp.dropLater(srv, fmt.Sprint("used", i))
	}
	if n, drops, got, _ := sp.work(); n != spareDBs-1 || drops != nil || got != srv {
		t.Fatalf("spares short: clone %d, drop %v; want clone %d, drop nothing", n, drops, spareDBs-1)
	}
	sp.ready = []string{"a", "b", "c", "d"}
	n, drops, _, _ := sp.work()
	if n != 0 || len(drops) != dropBatch || drops[0] != "used0" {
		t.Fatalf("spares full: clone %d, drop %v; want a batch of %d from the oldest", n, drops, dropBatch)
	}
	if _, drops, _, _ := sp.work(); len(drops) != 6-dropBatch {
		t.Fatalf("then: drop %v, want the other %d", drops, 6-dropBatch)
	}
	if n, drops, _, _ := sp.work(); n != 0 || drops != nil {
		t.Fatalf("nothing left: clone %d, drop %v", n, drops)
	}
	// Too many waiting: drops go first even with spares short.
	sp.ready = nil
	for i := 0; i <= maxDropsLater; i++ {
		sp.dropLater(srv, fmt.Sprint("x", i))
	}
	if n, drops, _, _ := sp.work(); n != 0 || len(drops) != dropBatch {
		t.Fatalf("%d waiting: clone %d, drop %v; want a batch dropped first", maxDropsLater+1, n, drops)
	}
	if n, _, _, _ := sp.work(); n != spareDBs {
		t.Fatalf("below the limit again: clone %d, want %d", n, spareDBs)
	}
	// A whole-instance reset: its databases went with the old clone.
	sp.invalidate()
	sp.dropLater(srv, "old")
	if n, drops, got, _ := sp.work(); n != 0 || drops != nil || got != nil {
		t.Fatalf("during a reset: clone %d, drop %v, server %v; want nothing", n, drops, got)
	}
	sp.server = &engine.Server{}
	if _, drops, _, _ := sp.work(); drops != nil {
		t.Fatalf("new server: drop %v, want none of the old server's", drops)
	}
}
