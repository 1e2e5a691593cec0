package daemon_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/instance"
)

// A released instance whose clone can be restored comes back as a new
// instance: the golden's data only, a new id, port and password, and
// nothing of the old one reachable or left in the store.
func TestReleasedInstanceIsRecycled(t *testing.T) {
	// copy: restored file by file and recycled; overlay: destroyed and
	// made anew, with the same guarantees.
	for _, b := range []string{"copy", "overlay"} {
		t.Run(b, func(t *testing.T) { recycled(t, b) })
	}
}

func recycled(t *testing.T, backendName string) {
	w := newWorld(t, "[pool]\nmin = 1\nmax = 1\n")
	ctx := context.Background()
	seen := map[string]bool{}
	var prev *api.Lease
	for i := 0; i < 3; i++ {
		l := w.acquire(api.AcquireRequest{Backend: backendName})
		if seen[l.ID] {
			t.Fatalf("lease %d: id %s handed out before", i, l.ID)
		}
		seen[l.ID] = true
		if got := query(t, l.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
			t.Fatalf("lease %d sees %v, want the golden's row only", i, got)
		}
		if got := query(t, l.DSN, "select count(*)::text from pg_tables where tablename = 'mine'"); got[0] != "0" {
			t.Fatalf("lease %d sees a table an earlier lease made", i)
		}
		if prev != nil {
			st, err := instance.Load(w.store, l.ID)
			if err != nil {
				t.Fatal(err)
			}
			// OverlayFS clones are made anew (one mount), not recycled.
			if recycled := st.RecycledFrom == prev.ID && l.ReadySteps["stop"] > 0 && st.Restored != nil && st.Restored.Files > 0; recycled != (backendName == "copy") {
				t.Errorf("lease %d on %s: recycled from %q (steps %v, restored %+v), want recycled: %v", i, backendName, st.RecycledFrom, l.ReadySteps, st.Restored, backendName == "copy")
			}
			if l.Env["PGPASSWORD"] == prev.Env["PGPASSWORD"] || l.DSN == prev.DSN {
				t.Errorf("lease %d kept the released lease's credentials: %s", i, l.DSN)
			}
			if c, err := pgx.Connect(ctx, prev.DSN); err == nil {
				c.Close(ctx)
				t.Errorf("the released lease's DSN still connects")
			}
			if _, err := instance.Load(w.store, prev.ID); err == nil {
				t.Errorf("released instance %s still in the store", prev.ID)
			}
		}
		exec1(t, l.DSN, "insert into notes(who) values ('test'); create table mine(a int); insert into mine values (1)")
		if err := w.c.Release(ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		prev = l
	}
}
