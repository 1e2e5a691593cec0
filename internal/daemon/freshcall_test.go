package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/testenv"
)

// max = 1, ahead = 0: no room for a next instance, so a lease whose slots ran out
// resets in place (the fallback these tests check).
const slotsToml = "[fresh]\nslots = 4\n[pool]\nmin = 0\nmax = 1\nahead = 0\n"

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
	for _, b := range []string{"copy", "reflink", "overlay", "btrfs"} {
		t.Run(b, func(t *testing.T) {
			testenv.RequireRoot(t)
			root := testenv.Dir(t)
			switch b {
			case "reflink", "overlay":
				root = testenv.LoopFS(t, "xfs", 1<<30)
			case "btrfs":
				root = testenv.LoopFS(t, "btrfs", 1<<30)
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
				refused(t, l.DSN) // the lease's own database: closed while slots are handed out
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

// Without slots, on PostgreSQL 15: a call has nothing to do while the
// lease is untouched (handed out, or reset, and nothing written since),
// and resets in place once anything was written, through any database.
func TestFreshModesReset(t *testing.T) {
	w := newWorld(t, "[pool]\nmin = 0\nmax = 2\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	if l.Slots != 0 {
		t.Fatalf("slots %d without [fresh]", l.Slots)
	}
	db := fresh(t, w, l.ID, api.ModeNone)
	fresh(t, w, l.ID, api.ModeNone) // read only: still untouched
	exec1(t, db.DSN, "insert into notes(who) values ('test')")
	db = fresh(t, w, l.ID, api.ModeReset)
	exec1(t, db.DSN, "create table other(a int)")
	db = fresh(t, w, l.ID, api.ModeReset)
	fresh(t, w, l.ID, api.ModeNone)
	// A lease written through its own DSN before its first fresh call
	// (a worker's setup) is not untouched.
	l2 := w.acquire(api.AcquireRequest{Backend: "copy"})
	exec1(t, l2.DSN, "insert into notes(who) values ('setup')")
	fresh(t, w, l2.ID, api.ModeReset)
}

// PostgreSQL 18 on XFS with two slots: slots first; with every slot used
// and no replacement instance to move to (max = 1, ahead = 0), the lease resets in
// place, which makes its slots unused again. It clones no databases in
// its server (no spares made ahead: ~40 ms of the server's CPU each,
// which its tests would not take); a golden without slots does.
func TestFreshModesPG18(t *testing.T) {
	w := pg18World(t, "[fresh]\nslots = 2\n[pool]\nmin = 0\nmax = 1\nahead = 0\n")
	l := w.acquire(api.AcquireRequest{})
	if l.Fresh != api.FreshReset || l.Slots != 2 {
		t.Fatalf("lease fresh %q slots %d, want reset and 2", l.Fresh, l.Slots)
	}
	for round := 0; round < 2; round++ {
		for i := 0; i < 2; i++ {
			db := fresh(t, w, l.ID, api.ModeSlot)
			if want := fmt.Sprintf("slot_%03d", i); db.Name != want {
				t.Fatalf("round %d: slot %q, want %q", round, db.Name, want)
			}
			if n := query(t, db.DSN, "select count(*) from notes where who = 'test'")[0]; n != "0" {
				t.Fatalf("round %d: %s holds %s rows of an earlier test", round, db.Name, n)
			}
			exec1(t, db.DSN, "insert into notes(who) values ('test')")
		}
		db := fresh(t, w, l.ID, api.ModeReset)
		exec1(t, db.DSN, "insert into notes(who) values ('test')")
	}
	if n := query(t, l.DSN, "select count(*) from pg_database where datname like 'dbfork%'")[0]; n != "0" {
		t.Fatalf("%s databases cloned in the server of a lease with slots", n)
	}
}

// A lease low on slots takes a ready instance from its pool in the
// background: the call that finds every slot used moves the lease to it
// and hands out its first slot, with no reset; the old instance goes.
func TestFreshSlotsRefreshAhead(t *testing.T) {
	w := newWorld(t, "[fresh]\nslots = 4\n[pool]\nmin = 1\nmax = 3\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	w.waitPool("a ready instance", func(p api.PoolInfo) bool { return p.Ready >= 1 })
	first := map[string]bool{}
	var port int
	for i := 0; i < 4; i++ {
		db := fresh(t, w, l.ID, api.ModeSlot)
		exec1(t, db.DSN, "insert into notes(who) values ('test')")
		first[db.Name], port = true, db.Conn.Port
	}
	w.waitPool("the replacement taken", func(p api.PoolInfo) bool { return p.Leased == 2 })
	db := fresh(t, w, l.ID, api.ModeSlot)
	if db.Conn.Port == port || db.Name != "slot_000" || db.Env["DBFORK_INSTANCE"] != l.ID {
		t.Fatalf("after the slots ran out with a replacement ready: %+v (old port %d)", db, port)
	}
	ls, err := w.c.Leases(context.Background())
	if err != nil || len(ls) != 1 || ls[0].ID != l.ID || ls[0].DSN == l.DSN {
		t.Fatalf("lease after the move: %+v %v", ls, err)
	}
	// The replacement's own database was closed when it was taken (a
	// pool built from the lease's new DSN must fail, as on the first
	// instance), and the slot handed out works.
	refused(t, ls[0].DSN)
	exec1(t, db.DSN, "insert into notes(who) values ('test')")
	w.waitPool("the old instance gone", func(p api.PoolInfo) bool { return p.Leased == 1 })
	if err := w.c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
}

// A pool of a golden with slots makes its leases' next instances past
// max (one per lease by default): with max = 1 and nothing in reserve
// (min = 0) the lease still moves to a new instance when its slots run
// out, rather than resetting in place on its test's time (8 test workers
// with the default max of 8 did, at every 33rd test). max still bounds
// the leases: a second one waits and is refused when its wait ends.
func TestFreshSlotsReplacementPastMax(t *testing.T) {
	w := newWorld(t, "[fresh]\nslots = 2\n[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	if p := w.pool(); p.Max != 1 || p.Ahead != 1 {
		t.Fatalf("pool of a golden with slots: %+v, want max 1 ahead 1", p)
	}
	var port int
	for round := 0; round < 3; round++ {
		for i := 0; i < 2; i++ {
			db := fresh(t, w, l.ID, api.ModeSlot)
			if round > 0 && i == 0 && db.Conn.Port == port {
				t.Fatalf("round %d: the lease did not move to a new instance (port %d)", round, port)
			}
			port = db.Conn.Port
			exec1(t, db.DSN, "insert into notes(who) values ('test')")
		}
	}
	_, err := w.c.Acquire(context.Background(), api.AcquireRequest{Recipe: w.recipe, Backend: "copy", WaitSeconds: 0.5})
	if err == nil || !strings.Contains(err.Error(), "became free") {
		t.Fatalf("a second lease past max 1: %v, want busy", err)
	}
	if err := w.c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
}

// A pool of a golden with slots left to auto makes OverlayFS instances
// first (one mount: nothing to wait for), and once it has thrown away
// daemon.ReflinkAfter of them per place (max 1 + ahead 1 here), reflink
// ones, which are restored after a lease instead: the lease ends up on a
// reflink instance and the next lease gets that same clone back, restored,
// with the golden's row only.
func TestSlotPoolTurnsToReflink(t *testing.T) {
	testenv.RequireRoot(t)
	w := newWorldAt(t, testenv.LoopFS(t, "xfs", 1<<30), "", "[fresh]\nslots = 2\n[pool]\nmin = 0\nmax = 1\n")
	l := w.acquire(api.AcquireRequest{})
	backendAt := func(port int) string {
		sts, err := instance.List(w.store)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range sts {
			if st.Server != nil && st.Server.Port == port {
				return st.Backend
			}
		}
		t.Fatalf("no instance serves port %d", port)
		return ""
	}
	var seen []string
	for round := 0; round < 2*daemon.ReflinkAfter*2+4 && (len(seen) == 0 || seen[len(seen)-1] != "reflink"); round++ {
		var db *api.FreshDB
		for i := 0; i < 2; i++ {
			db = fresh(t, w, l.ID, api.ModeSlot)
			exec1(t, db.DSN, "insert into notes(who) values ('test')")
		}
		seen = append(seen, backendAt(db.Conn.Port))
	}
	t.Logf("backends round by round: %v", seen)
	if seen[0] != "overlay" || seen[len(seen)-1] != "reflink" {
		t.Fatalf("backends of the lease's instances, round by round: %v; want overlay first, then reflink", seen)
	}
	if n := slices.Index(seen, "reflink"); n < 2*daemon.ReflinkAfter-2 {
		t.Fatalf("reflink after %d overlay instances (%v), want about %d thrown away first", n, seen, 2*daemon.ReflinkAfter)
	}
	// Released, its reflink instances are restored for the next lease,
	// which finds the golden's row only (fresh checks) in each slot.
	if err := w.c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
	l2 := w.acquire(api.AcquireRequest{})
	for i := 0; i < 2; i++ {
		if b := backendAt(fresh(t, w, l2.ID, api.ModeSlot).Conn.Port); b != "reflink" {
			t.Fatalf("the next lease got a %s instance, want a restored reflink one", b)
		}
	}
}

// Every slot used while the pool's next instance is still being made
// (8 tests in step take the whole reserve at once): the call waits for
// that instance and moves the lease there, instead of resetting in place
// (a stop, restore and start on the caller's time).
func TestFreshSlotsWaitForWarmingReplacement(t *testing.T) {
	w := newWorld(t, "[fresh]\nslots = 4\n[pool]\nmin = 1\nmax = 2\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	// No wait for the pool: its reserve (a full copy and a start) is
	// still warming while the four slots go.
	var port int
	for i := 0; i < 4; i++ {
		db := fresh(t, w, l.ID, api.ModeSlot)
		port = db.Conn.Port
	}
	if p := w.pool(); p.Ready != 0 {
		t.Logf("the reserve was ready before the slots ran out (%+v): the wait is not exercised", p)
	}
	db := fresh(t, w, l.ID, api.ModeSlot)
	if db.Conn.Port == port || db.Name != "slot_000" {
		t.Fatalf("after the slots ran out with a replacement warming: %+v (old port %d)", db, port)
	}
	exec1(t, db.DSN, "insert into notes(who) values ('test')")
}

// Many fresh calls at once on one lease, with resets and the background
// replacement racing them: no slot is served twice by one instance
// between two of its refreshes.
func TestFreshSlotsNeverTwice(t *testing.T) {
	w := newWorld(t, "[fresh]\nslots = 4\n[pool]\nmin = 1\nmax = 3\n")
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	ctx := context.Background()
	var mu sync.Mutex
	served := map[string]int{} // port/slot -> times
	refreshes := map[int]int{} // port -> resets (fresh fallback or Reset)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if g == 0 && i%4 == 3 {
					r, err := w.c.Reset(ctx, l.ID)
					if err != nil {
						t.Errorf("reset: %v", err)
						return
					}
					mu.Lock()
					refreshes[portOf(t, r.DSN)]++
					mu.Unlock()
					continue
				}
				db, err := w.c.Fresh(ctx, l.ID)
				if err != nil {
					t.Errorf("fresh: %v", err)
					return
				}
				mu.Lock()
				switch db.Mode {
				case api.ModeSlot:
					served[fmt.Sprintf("%d/%s", db.Conn.Port, db.Name)]++
				case api.ModeReset:
					refreshes[db.Conn.Port]++
				case api.ModeNone:
					// Every slot used and none written: the lease's own
					// database is as the golden has it (no WAL since the
					// last reset), a fresh answer that serves no slot.
				default:
					t.Errorf("mode %q on a lease with slots", db.Mode)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for k, n := range served {
		var port int
		fmt.Sscanf(k, "%d/", &port)
		if n > 1+refreshes[port] {
			t.Errorf("slot %s served %d times with %d refreshes of its instance", k, n, refreshes[port])
		}
	}
	if len(served) == 0 {
		t.Fatal("no slot served")
	}
}

func portOf(t *testing.T, dsn string) int {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return int(cfg.Port)
}

// A test process killed while it writes into its slot: its lease is
// reclaimed, and the next lease (of the same clone, recycled: max = 1)
// gets that slot back as the golden has it.
func TestFreshSlotsHolderKilled(t *testing.T) {
	w := newWorld(t, "[fresh]\nslots = 4\n[pool]\nmin = 0\nmax = 1\n")
	holder := exec.Command("sleep", "600")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	l := w.acquire(api.AcquireRequest{Backend: "copy", PID: holder.Process.Pid})
	db := fresh(t, w, l.ID, api.ModeSlot)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "begin; insert into notes(who) values ('committed'); commit; begin; insert into notes(who) values ('open')"); err != nil {
		t.Fatal(err)
	}
	_ = holder.Process.Kill()
	_ = holder.Wait()
	waitFor(t, "the dead holder's lease reclaimed", func() bool {
		ls, err := w.c.Leases(ctx)
		return err == nil && len(ls) == 0
	})
	l2 := w.acquire(api.AcquireRequest{Backend: "copy"})
	if got := fresh(t, w, l2.ID, api.ModeSlot); got.Name != db.Name {
		t.Fatalf("next lease's first slot %s, want %s again (restored)", got.Name, db.Name)
	}
}

// The backend of a server's admin connection, which the fresh call waits
// on to close the used slot, runs at the daemon's urgency (as a task, and
// as the scheduling group it leads) and in the lowest real-time class,
// while the tests' own backends keep theirs: the call answers first
// without the tests losing their share.
func TestFreshAdminBackendUrgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raising a process's priority needs root (CAP_SYS_NICE)")
	}
	w := newWorld(t, slotsToml)
	l := w.acquire(api.AcquireRequest{Backend: "copy"})
	ctx := context.Background()
	fresh(t, w, l.ID, api.ModeSlot)
	db := fresh(t, w, l.ID, api.ModeSlot) // the second call closes the first slot
	c, err := pgx.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var admin, own int
	if err := c.QueryRow(ctx, `SELECT pid, pg_backend_pid() FROM pg_stat_activity WHERE datname = 'postgres' AND backend_type = 'client backend'`).Scan(&admin, &own); err != nil {
		t.Fatalf("finding the admin connection's backend: %v", err)
	}
	for _, p := range []struct {
		pid  int
		want int
	}{{admin, proc.Urgent}, {own, 0}} {
		// getpriority's raw value is 20 - nice.
		if got, err := unix.Getpriority(unix.PRIO_PROCESS, p.pid); err != nil || 20-got != p.want {
			t.Errorf("backend %d: nice %d (%v), want %d", p.pid, 20-got, err, p.want)
		}
		if n, on, err := proc.GroupNice(p.pid); on && (err != nil || n != p.want) {
			t.Errorf("backend %d: autogroup nice %d (%v), want %d", p.pid, n, err, p.want)
		}
	}
	// The admin backend runs in the lowest real-time class; a test's
	// backend stays in the ordinary one.
	expedited(t, db.DSN)
	if attr, err := unix.SchedGetAttr(own, 0); err != nil || attr.Policy != 0 /* SCHED_OTHER */ {
		t.Errorf("the test's backend %d: scheduling policy %v (%v), want SCHED_OTHER", own, attr, err)
	}
}
