package cli

import (
	"runtime"
	"testing"
)

// The daemon gets spare Ps for its background threads, unless the
// environment sets GOMAXPROCS.
func TestSpareProcs(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	t.Setenv("GOMAXPROCS", "")
	spareProcs()
	if got := runtime.GOMAXPROCS(0); got != was+6 {
		t.Errorf("GOMAXPROCS %d after spareProcs, want %d", got, was+6)
	}
	runtime.GOMAXPROCS(was)
	t.Setenv("GOMAXPROCS", "3")
	spareProcs()
	if got := runtime.GOMAXPROCS(0); got != was {
		t.Errorf("GOMAXPROCS %d after spareProcs with GOMAXPROCS set, want it left at %d", got, was)
	}
}
