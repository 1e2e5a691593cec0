package daemon

import (
	"fmt"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
)

// The refill loop breaks given-back databases' connections first, clones
// before it drops, and drops once the spares are full, or once too many
// wait, a few at a time; nothing of a replaced server is kept.
func TestSparesWorkOrder(t *testing.T) {
	srv := &engine.Server{}
	sp := newSpares()
	sp.server = srv
	sp.ready = []string{"a"}
	for i := 0; i < 6; i++ {
		sp.dropLater(srv, fmt.Sprint("used", i))
	}
	if j := sp.work(); len(j.close) != 6 || j.clone != 0 || j.drop != nil || j.srv != srv {
		t.Fatalf("given back: %+v; want their connections broken first", j)
	}
	if j := sp.work(); j.clone != spareDBs-1 || j.drop != nil || j.close != nil {
		t.Fatalf("spares short: %+v; want clone %d, drop nothing", j, spareDBs-1)
	}
	sp.ready = []string{"a", "b", "c", "d"}
	j := sp.work()
	if j.clone != 0 || len(j.drop) != dropBatch || j.drop[0] != "used0" {
		t.Fatalf("spares full: %+v; want a batch of %d from the oldest", j, dropBatch)
	}
	if j := sp.work(); len(j.drop) != 6-dropBatch {
		t.Fatalf("then: %+v, want the other %d dropped", j, 6-dropBatch)
	}
	if j := sp.work(); j.clone != 0 || j.drop != nil || j.close != nil {
		t.Fatalf("nothing left: %+v", j)
	}
	// Too many waiting: drops go first even with spares short.
	sp.ready = nil
	for i := 0; i <= maxDropsLater; i++ {
		sp.dropLater(srv, fmt.Sprint("x", i))
	}
	sp.work() // their connections
	if j := sp.work(); j.clone != 0 || len(j.drop) != dropBatch {
		t.Fatalf("%d waiting: %+v; want a batch dropped first", maxDropsLater+1, j)
	}
	if j := sp.work(); j.clone != spareDBs {
		t.Fatalf("below the limit again: %+v, want clone %d", j, spareDBs)
	}
	// A whole-instance reset: its databases went with the old clone.
	sp.invalidate()
	sp.dropLater(srv, "old")
	if j := sp.work(); j.clone != 0 || j.drop != nil || j.close != nil || j.srv != nil {
		t.Fatalf("during a reset: %+v; want nothing", j)
	}
	sp.server = &engine.Server{}
	if j := sp.work(); j.drop != nil || j.close != nil {
		t.Fatalf("new server: %+v, want none of the old server's", j)
	}
}
