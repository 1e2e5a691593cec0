package daemon_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

const slotsToml = "[fresh]\nslots = 4\n[pool]\nmin = 0\nmax = 2\n"

// fresh calls the one server-side fresh call and checks the answer
// names a database that has the golden's rows only.
func fresh(t *testing.T, w *world, id, wantMode string) *api.FreshDB {
	t.Helper()
	db, err := w.c.Fresh(context.Background(), id)
	if err != nil {
		t.Fatalf("fresh: %v", err)
	}
	if db.Mode != wantMode {
		t.Fatalf("fresh mode %q (%s), want %q", db.Mode, db.Name, wantMode)
	}
	if db.Conn.Database != db.Name || db.Env["PGDATABASE"] != db.Name || db.Conn.Port == 0 {
		t.Fatalf("fresh answer does not name its database: %+v", db)
	}
	if got := query(t, db.DSN, "select who from notes order by id"); len(got) != 1 || got[0] != "golden" {
		t.Fatalf("fresh %s database %s has %v, want the golden's row only", db.Mode, db.Name, got)
	}
	return db
}

// A golden with slots: each fresh call hands out the next unused slot,
// none twice, and what a test writes into its slot is in no other slot,
// not in the lease's own database, not in the next lease; once all are
// used the instance is reset in place (the fallback), which makes them
// all unused again.
func TestFreshSlots(t *testing.T) {
	for _, b := range []string{"copy", "reflink"} {
		t.Run(b, func(t *testing.T) {
			testenv.RequireRoot(t)
			root := testenv.Dir(t)
			if b == "reflink" {
				root = testenv.LoopFS(t, "xfs", 1<<30)
			}
			w := newWorldAt(t, root, "", slotsToml)
			l := w.acquire(api.AcquireRequest{Backend: b})
			if l.Slots != 4 {
				t.Fatalf("lease slots %d, want 4", l.Slots)
			}
			for round := 0; round < 2; round++ {
				seen := map[string]bool{}
				for i := 0; i < 4; i++ {
					db := fresh(t, w, l.ID, api.ModeSlot)
					if seen[db.Name] || db.Name == "shop" || db.SlotsLeft != 3-i {
						t.Fatalf("round %d call %d: slot %s (left %d) served twice or wrong (seen %v)", round, i, db.Name, db.SlotsLeft, seen)
					}
					seen[db.Name] = true
					exec1(t, db.DSN, fmt.Sprintf("insert into notes(who) values ('test %d')", i))
				}
				if got := query(t, l.DSN, "select count(*) from notes"); got[0] != "1" {
					t.Fatalf("the lease's own database has %s rows after tests wrote into slots", got[0])
				}
				// All used: the instance is reset, every slot is clean again.
				db := fresh(t, w, l.ID, api.ModeReset)
				if db.Name != "shop" || db.SlotsLeft != 4 {
					t.Fatalf("after the slots ran out: %+v", db)
				}
			}
			if err := w.c.Release(context.Background(), l.ID); err != nil {
				t.Fatal(err)
			}
			l2 := w.acquire(api.AcquireRequest{Backend: b})
			for i := 0; i < 4; i++ {
				fresh(t, w, l2.ID, api.ModeSlot) // checks: the golden's row only
			}
		})
	}
}

// A slot that was handed out is closed by the next fresh call: a test
// (or a client killed mid-test) cannot keep writing into it, or hand it
// on, and its open connections are ended.
func TestFreshSlotRetired(t *testing.T) {
	w := newWorld(t, slotsToml)
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	ctx := context.Background()
	first := fresh(t, w, l.ID, api.ModeSlot)
	c, err := pgx.Connect(ctx, first.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	fresh(t, w, l.ID, api.ModeSlot)
	waitFor(t, "the used slot to refuse connections", func() bool {
		c2, err := pgx.Connect(ctx, first.DSN)
		if err == nil {
			c2.Close(ctx)
		}
		return err != nil
	})
	if _, err := c.Exec(ctx, "insert into notes(who) values ('late')"); err == nil {
		t.Fatal("a connection to a used slot still writes after the next fresh call")
	}
}

// Without slots, on PostgreSQL 15: the first call has nothing to do
// (the lease is untouched), later ones reset in place.
func TestFreshModesReset(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	if l.Slots != 0 {
		t.Fatalf("slots %d without [fresh]", l.Slots)
	}
	db := fresh(t, w, l.ID, api.ModeNone)
	exec1(t, db.DSN, "insert into notes(who) values ('test')")
	db = fresh(t, w, l.ID, api.ModeReset)
	exec1(t, db.DSN, "insert into notes(who) values ('test')")
	fresh(t, w, l.ID, api.ModeReset)
}

// PostgreSQL 18 on XFS with two slots: slots first, then databases cloned
// in the server; the previous database goes.
func TestFreshModesPG18(t *testing.T) {
	w := pg18World(t, "[fresh]\nslots = 2\n[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{})
	if l.Fresh != api.FreshDatabase || l.Slots != 2 {
		t.Fatalf("lease fresh %q slots %d", l.Fresh, l.Slots)
	}
	for i := 0; i < 2; i++ {
		db := fresh(t, w, l.ID, api.ModeSlot)
		exec1(t, db.DSN, "insert into notes(who) values ('test')")
	}
	var prev string
	for i := 0; i < 3; i++ {
		db := fresh(t, w, l.ID, api.ModeDatabase)
		exec1(t, db.DSN, "insert into notes(who) values ('test')")
		if prev != "" {
			name := prev
			waitFor(t, "the previous fresh database to be dropped", func() bool {
				return query(t, l.DSN, fmt.Sprintf("select count(*) from pg_database where datname = '%s'", name))[0] == "0"
			})
		}
		prev = db.Name
	}
	if got := query(t, l.DSN, "select count(*) from notes"); got[0] != "1" {
		t.Fatalf("lease database has %s rows", got[0])
	}
}
