package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/testenv"
)

// pg18World is a daemon whose store is on a real XFS loop filesystem and
// whose recipe runs PostgreSQL 18: leases hand out fresh databases.
func pg18World(t *testing.T, poolToml string) *world {
	t.Helper()
	testenv.RequireRoot(t)
	bindir := testenv.PG18Bindir(t)
	return newWorldAt(t, testenv.LoopFS(t, "xfs", 2<<30), fmt.Sprintf("bindir = %q\n", bindir), poolToml)
}

// A lease on PostgreSQL 18 on XFS hands out databases cloned from the
// golden's: each has the seed rows only, is its own (writes stay in it),
// can be dropped early, and goes with the lease. Reset uses the template
// too, and keeps the DSN.
func TestFreshDatabases(t *testing.T) {
	w := pg18World(t, "[pool]\nmin = 1\nmax = 2\n")
	ctx := context.Background()
	l := w.acquire(api.AcquireRequest{})
	if l.Fresh != api.FreshDatabase {
		t.Fatalf("fresh %q, want %q on PostgreSQL 18 on XFS", l.Fresh, api.FreshDatabase)
	}
	var names []string
	for i := 0; i < 6; i++ {
		db, err := w.c.CreateDatabase(ctx, l.ID)
		if err != nil {
			t.Fatalf("database %d: %v", i, err)
		}
		if !strings.HasPrefix(db.Name, "t_") || !strings.Contains(db.DSN, "/"+db.Name+"?") || db.Env["PGDATABASE"] != db.Name ||
			db.Env["DBFORK_INSTANCE"] != l.ID || !strings.Contains(db.SocketDSN, "/"+db.Name) {
			t.Fatalf("database %d: %+v", i, db)
		}
		if got := query(t, db.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
			t.Fatalf("database %d is not the golden's: %v", i, got)
		}
		exec1(t, db.DSN, "insert into notes(who) values ('test'); create table mine(a int)")
		names = append(names, db.Name)
	}
	// The lease's own database saw none of that.
	if got := query(t, l.DSN, "select count(*)::text from notes"); got[0] != "1" {
		t.Errorf("lease database after fresh ones were written: %v", got)
	}
	held, err := pgx.Connect(ctx, query1DSN(names[0], l.DSN))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close(ctx)
	if err := w.c.DropDatabase(ctx, l.ID, names[0]); err != nil {
		t.Fatal(err)
	}
	// A database given back loses its connections at once, dropped or not.
	waitFor(t, "a given-back database's connection broken", func() bool {
		_, err := held.Exec(ctx, "select 1")
		return err != nil
	})
	for _, c := range []struct {
		name string
		kind error
	}{{names[0], errs.ErrNotFound}, {"shop", errs.ErrNotFound}, {"dbfork_template", errs.ErrNotFound}} {
		if err := w.c.DropDatabase(ctx, l.ID, c.name); !errors.Is(err, c.kind) {
			t.Errorf("drop %s: %v, want %v", c.name, err, c.kind)
		}
	}
	waitFor(t, "dropped database gone", func() bool {
		return len(query(t, l.DSN, fmt.Sprintf("select 1 from pg_database where datname = '%s'", names[0]))) == 0
	})
	// Reset of a database lease: same DSN, seed rows, connections broken.
	old, err := pgx.Connect(ctx, l.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	exec1(t, l.DSN, "delete from notes")
	oldOID := query(t, l.DSN, "select oid::text from pg_database where datname = current_database()")[0]
	r, err := w.c.Reset(ctx, l.ID)
	if err != nil || r.DSN != l.DSN || r.Fresh != api.FreshDatabase {
		t.Fatalf("reset: %+v %v", r, err)
	}
	// A spare was ready: it took the database's name, and the old one
	// is dropped in the background.
	if _, ok := r.ResetSteps["swap in a spare database"]; !ok {
		t.Errorf("reset steps %v: want a spare swapped in", r.ResetSteps)
	}
	waitFor(t, "the reset's old database dropped", func() bool {
		return len(query(t, l.DSN, "select 1 from pg_database where oid = "+oldOID)) == 0
	})
	if got := query(t, l.DSN, "select who from notes"); len(got) != 1 {
		t.Errorf("after reset: %v", got)
	}
	if _, err := old.Exec(ctx, "select 1"); err == nil {
		t.Error("a connection from before the reset still works")
	}
	db, err := w.c.CreateDatabase(ctx, l.ID)
	if err != nil {
		t.Fatalf("fresh database after a reset: %v", err)
	}
	if got := query(t, db.DSN, "select count(*)::text from notes"); got[0] != "1" {
		t.Errorf("fresh database after reset: %v", got)
	}
	if err := w.c.Release(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.CreateDatabase(ctx, l.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("database for a released lease: %v", err)
	}
}

// Clients asking at once, faster than spares are cloned: every database is
// distinct and fresh.
func TestFreshDatabasesConcurrent(t *testing.T) {
	w := pg18World(t, "[pool]\nmin = 1\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{})
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				db, err := w.c.CreateDatabase(context.Background(), l.ID)
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				got := query(t, db.DSN, "select count(*)::text from notes")
				exec1(t, db.DSN, "insert into notes(who) values ('x')")
				mu.Lock()
				if seen[db.Name] || got[0] != "1" {
					t.Errorf("database %s handed out twice or not fresh (%v)", db.Name, got)
				}
				seen[db.Name] = true
				mu.Unlock()
				if err := w.c.DropDatabase(context.Background(), l.ID, db.Name); err != nil {
					t.Errorf("drop: %v", err)
				}
			}
		}()
	}
	wg.Wait()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// query1DSN is dsn with its database name replaced by name.
func query1DSN(name, dsn string) string {
	u, _, _ := strings.Cut(dsn, "?")
	i := strings.LastIndex(u, "/")
	return u[:i+1] + name + strings.TrimPrefix(dsn, u)
}
