package daemon_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

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

// expedited checks that the server behind dsn has one admin backend (the
// daemon's session on "postgres") and that it runs in the lowest
// real-time class, which its children would not inherit.
func expedited(t *testing.T, dsn string) {
	t.Helper()
	pids := query(t, dsn, "select pid::text from pg_stat_activity where datname = 'postgres' and backend_type = 'client backend'")
	if len(pids) != 1 {
		t.Fatalf("admin backends on the server: %v, want one", pids)
	}
	pid, err := strconv.Atoi(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	attr, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_FIFO || attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Fatalf("admin backend %d: policy %d flags %#x, want SCHED_FIFO reset on fork", pid, attr.Policy, attr.Flags)
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

// The fresh call closes the last test's database over a connection the
// daemon keeps per server (no new backend per call). A test may end that
// connection (terminating every other session is a common clean-up) and
// may CREATE DATABASE from template1 (which a session on template1 would
// block): both keep working, and the next fresh call still closes the
// database the test before it used.
func TestFreshAdminConnectionSurvivesTests(t *testing.T) {
	testenv.RequireRoot(t)
	w := newWorld(t, "[fresh]\nslots = 3\n[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	first := fresh(t, w, l.ID, api.ModeSlot)
	second := fresh(t, w, l.ID, api.ModeSlot) // the admin connection exists now: it closed the first slot
	expedited(t, second.DSN)
	exec1(t, second.DSN, "create database made_by_a_test")
	exec1(t, second.DSN, "select pg_terminate_backend(pid) from pg_stat_activity where pid <> pg_backend_pid() and backend_type = 'client backend'")
	third := fresh(t, w, l.ID, api.ModeSlot)
	expedited(t, third.DSN) // the admin connection made again
	for _, dsn := range []string{first.DSN, second.DSN} {
		c, err := pgx.Connect(context.Background(), dsn)
		if err == nil {
			c.Close(context.Background())
			t.Fatalf("a used slot %s still takes connections", dsn)
		}
		if !strings.Contains(err.Error(), "not currently accepting connections") {
			t.Fatalf("connecting to a used slot: %v", err)
		}
	}
}
