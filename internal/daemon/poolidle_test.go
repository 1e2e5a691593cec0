package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A pool nobody leased from for PoolIdle closes with its warm instances
// (they held memory and disk until the daemon exited); a lease held past
// PoolIdle keeps it; the next acquire makes it again.
func TestIdlePoolCloses(t *testing.T) {
	testenv.RequireRoot(t)
	w := newWorldOpts(t, testenv.Dir(t), "", "[pool]\nmin = 2\nmax = 4\n", func(o *daemon.Options) { o.PoolIdle = 300 * time.Millisecond })
	l := w.acquire(api.AcquireRequest{})
	time.Sleep(time.Second) // longer than PoolIdle, with a lease held
	if p := w.pool(); p.Retired || p.Leased != 1 {
		t.Fatalf("a pool with a lease was retired: %+v", p)
	}
	if err := w.c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ps, err := w.c.Pools(context.Background())
		ins, _ := instance.List(w.store)
		if err == nil && len(ps) == 0 && len(ins) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("idle pool still there: pools %+v, %d instances", ps, len(ins))
		}
		time.Sleep(50 * time.Millisecond)
	}
	l = w.acquire(api.AcquireRequest{})
	if got := query(t, l.DSN, "select who from notes"); len(got) != 1 || got[0] != "golden" {
		t.Fatalf("after the pool was made again: %v", got)
	}
}

// Capacity counts every pool: two pools that each fit alone are refused
// together, with what the others may still take in the message.
func TestCapacityAcrossPools(t *testing.T) {
	testenv.RequireRoot(t)
	w := newWorld(t, "[pool]\nmin = 0\nmax = 1\n")
	avail := memAvailable(t)
	// PostgreSQL's per-instance figure is 48 MiB: each max takes ~55 % of
	// what is available (a pool's max is at most 256), so one pool fits
	// and two do not.
	max := min(256, int(avail*55/100/(48<<20)))
	if 2*uint64(max)*(48<<20) < avail*9/10+(96<<20) {
		t.Skipf("MemAvailable %d MiB: two pools of 256 fit; this needs a machine with under ~26 GiB available", avail>>20)
	}
	recipe := func(name string) string {
		return testenv.WriteRecipe(t, filepath.Join(w.root, name), fmt.Sprintf(
			"engine = \"postgres\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"seed.sql\"]\n[pool]\nmin = 0\nmax = %d\n", max),
			map[string]string{"seed.sql": "create table " + name + "(a int);\n"})
	}
	ctx := context.Background()
	a, err := w.c.Acquire(ctx, api.AcquireRequest{Recipe: recipe("a")})
	if err != nil {
		t.Fatalf("pool a alone (max %d): %v", max, err)
	}
	defer w.c.Release(ctx, a.ID)
	_, err = w.c.Acquire(ctx, api.AcquireRequest{Recipe: recipe("b")})
	if err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "other pools") || !strings.Contains(err.Error(), "fits") {
		t.Fatalf("pool b beside a: %v, want a refusal naming the other pools", err)
	}
}

func memAvailable(t *testing.T) uint64 {
	n := proc.MemInfo("MemAvailable")
	if n == 0 {
		t.Fatal("no MemAvailable in /proc/meminfo")
	}
	return n
}
