package daemon_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

// refused checks that the lease's own database takes no connection, and
// says why in the server's words.
func refused(t *testing.T, dsn string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err == nil {
		c.Close(context.Background())
		t.Fatalf("the lease's own database %s still takes connections after a slot or database was handed out", dsn)
	}
	if !strings.Contains(err.Error(), "not currently accepting connections") {
		t.Fatalf("connecting to the lease's own database: %v, want \"not currently accepting connections\"", err)
	}
}

// An app that built its pool from DATABASE_URL (the lease's own
// database) before the fresh call must not go on using it quietly, seeing
// earlier tests' rows: once a slot is handed out the lease's database
// ends the pool's connections and refuses new ones. A reset opens it
// again (its data is the golden's), and the next slot closes it again.
func TestFreshStalePoolFailsLoudly(t *testing.T) {
	testenv.RequireRoot(t)
	w := newWorld(t, "[fresh]\nslots = 2\n[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	ctx := context.Background()
	pool, err := pgx.Connect(ctx, l.DSN) // the module-level pool, made before any fresh call
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close(ctx)
	if _, err := pool.Exec(ctx, "select 1"); err != nil {
		t.Fatal(err)
	}
	db := fresh(t, w, l.ID, api.ModeSlot)
	exec1(t, db.DSN, "insert into notes(who) values ('test 1')")
	if _, err := pool.Exec(ctx, "insert into notes(who) values ('stale')"); err == nil {
		t.Fatal("a connection to the lease's own database opened before the fresh call still works after it")
	}
	refused(t, l.DSN)
	fresh(t, w, l.ID, api.ModeSlot)
	refused(t, l.DSN)

	if _, err := w.c.Reset(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if got := query(t, l.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
		t.Fatalf("after a reset the lease's own database has %v", got)
	}
	fresh(t, w, l.ID, api.ModeSlot)
	refused(t, l.DSN)
}
