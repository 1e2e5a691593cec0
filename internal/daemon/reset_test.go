package daemon_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/testenv"
)

func exec1(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// A reset keeps every way of connecting (same DSN, port, password,
// database) and brings back the golden's rows only; connections opened
// before it are broken.
func TestResetInPlace(t *testing.T) {
	// A mounted clone (overlay) is remade in place; plain-dir clones
	// (copy, reflink) are restored file by file.
	for _, b := range []string{"overlay", "copy", "reflink"} {
		t.Run(b, func(t *testing.T) {
			testenv.RequireRoot(t)
			root := testenv.Dir(t)
			if b == "reflink" {
				root = testenv.LoopFS(t, "xfs", 1<<30)
			}
			resetInPlace(t, newWorldAt(t, root, "", "[pool]\nmin = 0\nmax = 2\n"), b)
		})
	}
}

func resetInPlace(t *testing.T, w *world, backendName string) {
	l := w.acquire(api.AcquireRequest{Backend: backendName})
	if l.Backend != backendName {
		t.Fatalf("backend %s, want %s", l.Backend, backendName)
	}
	if l.Fresh != api.FreshReset {
		t.Errorf("fresh %q on PostgreSQL %s, want %q", l.Fresh, "15", api.FreshReset)
	}
	ctx := context.Background()
	old, err := pgx.Connect(ctx, l.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(ctx)
	for i := 1; i <= 3; i++ {
		exec1(t, l.DSN, "insert into notes(who) values ('test'); create table scratch(a int)")
		if got := query(t, l.DSN, "select count(*)::text from notes"); got[0] != "2" {
			t.Fatalf("before reset: %v", got)
		}
		r, err := w.c.Reset(ctx, l.ID)
		if err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
		if r.ID != l.ID || r.DSN != l.DSN || r.SocketDSN != l.SocketDSN || r.Env["PGPORT"] != l.Env["PGPORT"] ||
			r.Env["PGPASSWORD"] != l.Env["PGPASSWORD"] || r.Env["PGDATABASE"] != "shop" || r.Resets != i || r.ResetMs <= 0 {
			t.Fatalf("reset %d changed the lease: %+v, was %+v", i, r, l)
		}
		if got := query(t, r.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
			t.Fatalf("after reset %d: %v", i, got)
		}
		if got := query(t, r.SocketDSN, "select count(*)::text from pg_tables where tablename = 'scratch'"); got[0] != "0" {
			t.Fatalf("a table made before reset %d survived it", i)
		}
		if len(r.ResetSteps) == 0 || r.ResetSteps["start"] <= 0 {
			t.Errorf("reset steps %v", r.ResetSteps)
		}
		// Plain-dir clones (copy, reflink) are restored: only the files
		// the server changed are made again from the golden; a mounted
		// clone (overlay) is remade.
		_, restored := r.ResetSteps["restore"]
		if wantRestore := backendName != "overlay"; restored != wantRestore {
			t.Errorf("reset %d on %s: steps %v; want a restore: %v", i, backendName, r.ResetSteps, wantRestore)
		}
	}
	if _, err := old.Exec(ctx, "select 1"); err == nil {
		t.Error("a connection opened before the reset still works")
	}
	ls, _ := w.c.Leases(ctx)
	if len(ls) != 1 || ls[0].Resets != 3 {
		t.Errorf("leases after resets: %+v", ls)
	}
	for _, c := range []struct {
		id   string
		kind error
	}{{"0badf00d", errs.ErrNotFound}, {"..%2fx", errs.ErrInvalid}} {
		if _, err := w.c.Reset(ctx, c.id); !errors.Is(err, c.kind) {
			t.Errorf("reset %s: %v, want %v", c.id, err, c.kind)
		}
	}
	if _, err := w.c.CreateDatabase(ctx, l.ID); !errors.Is(err, errs.ErrUnsupported) || !strings.Contains(err.Error(), "reset") {
		t.Errorf("fresh database on a reset lease: %v", err)
	}
	if err := w.c.Release(ctx, l.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.c.Reset(ctx, l.ID); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("reset after release: %v", err)
	}
}

// Release racing a reset: whichever way it goes, the lease ends, the
// instance goes, no server or clone is left.
func TestResetRacingRelease(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 2\n")
	ctx := context.Background()
	for i, delay := range []time.Duration{0, 20 * time.Millisecond, 60 * time.Millisecond, 120 * time.Millisecond} {
		l := w.acquire(api.AcquireRequest{})
		var wg sync.WaitGroup
		var resetErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, resetErr = w.c.Reset(ctx, l.ID)
		}()
		time.Sleep(delay)
		if err := w.c.Release(ctx, l.ID); err != nil {
			t.Errorf("race %d: release: %v", i, err)
		}
		wg.Wait()
		if resetErr != nil && !errors.Is(resetErr, errs.ErrNotFound) {
			t.Errorf("race %d: reset: %v (want success or not_found)", i, resetErr)
		}
		w.waitPool("released instance destroyed", func(p api.PoolInfo) bool { return p.Leased == 0 && p.Discarding == 0 && p.Warming == 0 })
		if _, err := instance.Load(w.store, l.ID); err == nil {
			t.Errorf("race %d: instance %s still in the store", i, l.ID)
		}
	}
	if ls, _ := w.c.Leases(ctx); len(ls) != 0 {
		t.Errorf("leases left: %+v", ls)
	}
}

// A caller that gives up during a reset gets its error at once; the reset
// finishes without it, and the lease is usable and fresh afterwards.
func TestResetCallerGoesAway(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{})
	exec1(t, l.DSN, "insert into notes(who) values ('test')")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	_, err := w.c.Reset(ctx, l.ID)
	cancel()
	if err == nil {
		t.Fatal("a reset with a 5 ms deadline answered in time; the test needs it to be cut short")
	}
	// The next call waits for the running reset, then does its own.
	r, err := w.c.Reset(context.Background(), l.ID)
	if err != nil {
		t.Fatalf("reset after an abandoned one: %v", err)
	}
	if r.DSN != l.DSN || r.Resets != 2 {
		t.Errorf("lease after two resets: %+v", r)
	}
	if got := query(t, r.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
		t.Fatalf("after reset: %v", got)
	}
}

// A server that does not come back after a reset ends the lease with its
// log tail; nothing is left of the instance.
func TestResetServerFailsToComeBack(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{})
	// The server user can no longer create its socket: the restart fails.
	sock := filepath.Join(l.InstanceDir, "sock")
	if err := os.Chown(sock, 0, 0); err != nil {
		t.Fatal(err)
	}
	_, err := w.c.Reset(context.Background(), l.ID)
	if err == nil || !strings.Contains(err.Error(), "lease has ended") || !strings.Contains(err.Error(), "server log") ||
		!strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("reset with a server that cannot start: %v", err)
	}
	if ls, _ := w.c.Leases(context.Background()); len(ls) != 0 {
		t.Errorf("lease survived a failed reset: %+v", ls)
	}
	w.waitPool("failed instance destroyed", func(p api.PoolInfo) bool { return p.Leased == 0 && p.Discarding == 0 && p.Warming == 0 })
	if _, err := instance.Load(w.store, l.ID); err == nil {
		t.Errorf("instance %s still in the store", l.ID)
	}
	// The pool goes on: the next lease works.
	l2 := w.acquire(api.AcquireRequest{})
	if got := query(t, l2.DSN, "select who from notes"); len(got) != 1 {
		t.Errorf("next lease: %v", got)
	}
}
