package daemon_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
)

// A recipe that sets no [pool] max gets the default (8) as a start: a
// 9th lease asked for while 8 are out (pytest -n 9 and more) grows the
// pool by one instead of waiting for another worker's session to end.
// A max the caller sets is kept: past it, callers wait and get busy.
func TestDefaultMaxGrowsWithLeases(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\n")
	var ids []string
	for i := 0; i < 9; i++ {
		l := w.acquire(api.AcquireRequest{Backend: "copy", WaitSeconds: 30})
		ids = append(ids, l.ID)
	}
	if p := w.pool(); p.Max != 9 || p.Leased != 9 {
		t.Fatalf("after 9 leases with no max set: %+v, want max 9, 9 leased", p)
	}
	// A later acquire that names no max keeps what the pool grew to.
	if err := w.c.Release(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	ids[0] = w.acquire(api.AcquireRequest{Backend: "copy", WaitSeconds: 30}).ID
	if p := w.pool(); p.Max != 9 {
		t.Fatalf("after another acquire: max %d, want 9", p.Max)
	}
	// The caller's own max is a bound.
	nine := 9
	_, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe, Backend: "copy", Max: &nine, WaitSeconds: 0.3})
	if !errors.Is(err, errs.ErrBusy) {
		t.Fatalf("a 10th lease with max = 9 asked for: %v, want busy", err)
	}
	for _, id := range ids {
		if err := w.c.Release(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
}
