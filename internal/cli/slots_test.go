package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
)

// A daemon kill -9'd while a lease on a golden with slots is handing
// them out (and taking a replacement ahead): gc leaves nothing.
func TestServeKilledWithSlots(t *testing.T) {
	e := newEnv(t)
	recipe := filepath.Join(e.proj, "dbfork.toml")
	f, err := os.OpenFile(recipe, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("\n[fresh]\nslots = 4\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	srv, _, c := e.startServe("-f", "dbfork.toml")
	ctx := context.Background()
	l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: recipe})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		db, err := c.Fresh(ctx, l.ID)
		if err != nil || db.Mode != api.ModeSlot {
			t.Fatalf("fresh %d: %+v %v", i, db, err)
		}
	}
	_ = srv.Process.Kill()
	_ = srv.Wait()
	e.mustRun("gc")
	e.assertNothingLeft()
}
