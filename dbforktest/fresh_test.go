package dbforktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/dbforktest"
	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

// freshRuns runs n subtests that each take Fresh, check they see the
// golden's rows only, and write; it returns what they got.
func freshRuns(t *testing.T, recipe string, n int, parallel bool) []*dbforktest.Instance {
	var mu sync.Mutex
	var got []*dbforktest.Instance
	t.Run("group", func(t *testing.T) {
		for i := 0; i < n; i++ {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				if parallel {
					t.Parallel()
				}
				in := dbforktest.Fresh(t, recipe)
				if r := rows(t, in.DSN); r != "golden" {
					t.Errorf("test %d starts with %q, want the golden's rows only", i, r)
				}
				write(t, in.DSN, fmt.Sprintf("test-%d", i))
				mu.Lock()
				got = append(got, in)
				mu.Unlock()
			})
		}
	})
	return got
}

// Without in-server clones (PostgreSQL 15) Fresh shares one lease between
// tests run one after the other and resets it before each; tests running
// at once get a lease each. Close ends them.
func TestFreshByReset(t *testing.T) {
	storeDir, recipe := setup(t)
	startDaemon(t, storeDir)
	t.Setenv("DBFORK_SOCKET", api.SocketPath(storeDir))
	t.Cleanup(dbforktest.Close)
	seq := freshRuns(t, recipe, 3, false)
	if len(seq) != 3 || seq[0].ID != seq[1].ID || seq[1].ID != seq[2].ID || seq[0].DSN != seq[2].DSN {
		t.Fatalf("sequential tests did not share a lease: %+v", seq)
	}
	for _, in := range seq {
		if in.Mode != dbforktest.ModeReset {
			t.Errorf("mode %q, want reset", in.Mode)
		}
	}
	par := freshRuns(t, recipe, 2, true)
	if len(par) != 2 || par[0].ID == par[1].ID {
		t.Fatalf("parallel tests shared a lease: %+v", par)
	}
	dbforktest.Close()
	// The pool destroys released instances in the background; it keeps
	// min = 1 ready.
	deadline := time.Now().Add(30 * time.Second)
	for count(t, storeDir) > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d instances after Close", count(t, storeDir))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With PostgreSQL 18 on an XFS store, each test gets its own database
// cloned inside one leased server.
func TestFreshByDatabase(t *testing.T) {
	testenv.RequireRoot(t)
	bindir := testenv.PG18Bindir(t)
	_, recipe := setup(t)
	storeDir := filepath.Join(testenv.LoopFS(t, "xfs", 2<<30), "store")
	t.Setenv("DBFORK_STORE", storeDir)
	b, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recipe, []byte(fmt.Sprintf("bindir = %q\n", bindir)+string(b)), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, storeDir)
	t.Setenv("DBFORK_SOCKET", api.SocketPath(storeDir))
	t.Cleanup(dbforktest.Close)
	got := freshRuns(t, recipe, 4, false)
	names := map[string]bool{}
	for _, in := range got {
		if in.Mode != dbforktest.ModeDatabase || in.ID != got[0].ID || !strings.HasPrefix(in.Database, "t_") ||
			in.Env["PGDATABASE"] != in.Database || names[in.Database] {
			t.Errorf("fresh database %+v", in)
		}
		names[in.Database] = true
	}
	// Each was dropped when its test ended (in the background).
	cfg, err := pgx.ParseConfig(got[0].DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "postgres"
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for {
		var left int
		if err := c.QueryRow(context.Background(), "select count(*) from pg_database where datname = any($1)", keys(names)).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fresh databases not dropped after their tests", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A golden with slots: tests run one after the other each get the next
// slot of one lease (no reset, no clone); once they are used the lease
// moves to an instance its pool had ready (its first slot) or resets.
func TestFreshBySlots(t *testing.T) {
	storeDir, recipe := setup(t)
	b, err := os.ReadFile(recipe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recipe, append(b, "[fresh]\nslots = 3\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, storeDir)
	t.Setenv("DBFORK_SOCKET", api.SocketPath(storeDir))
	t.Cleanup(dbforktest.Close)
	got := freshRuns(t, recipe, 4, false)
	names := map[string]bool{}
	for i, in := range got[:3] {
		if in.Mode != dbforktest.ModeSlot || in.ID != got[0].ID || in.Database != fmt.Sprintf("slot_%03d", i) ||
			in.Env["PGDATABASE"] != in.Database || names[in.Database] {
			t.Errorf("test %d: %+v, want slot_%03d", i, in, i)
		}
		names[in.Database] = true
	}
	in := got[3]
	moved := in.Mode == dbforktest.ModeSlot && in.Database == "slot_000" && in.DSN != got[0].DSN
	if in.ID != got[0].ID || !(moved || in.Mode == dbforktest.ModeReset) {
		t.Errorf("after the slots: %+v, want the same lease, moved or reset", in)
	}
}
