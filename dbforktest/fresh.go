package dbforktest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/api"
)

// Modes of Fresh (Instance.Mode).
const (
	// ModeDatabase: a database cloned inside a running server
	// (PostgreSQL 18 on a store that shares extents), dropped after the
	// test.
	ModeDatabase = api.FreshDatabase
	// ModeReset: an instance reset in place to the golden before the test.
	ModeReset = api.FreshReset
	// ModeSlot: the next unused slot of a golden built with [fresh]
	// slots, a database copied at build time (no work per test).
	ModeSlot = api.ModeSlot
	// ModeLease: the lease's own database, a whole instance of its own
	// (New and Open; Fresh without a daemon). The name every client
	// reports for it (docs/api.md, the client contract).
	ModeLease = "lease"
	// ModeInstance is ModeLease's old name.
	//
	// Deprecated: use ModeLease.
	ModeInstance = ModeLease
)

// shared are the leases Fresh reuses between tests, per recipe. A lease
// serves one test at a time; tests running in parallel get one each. They
// end with the test process (the daemon reclaims them), or with Close.
var shared struct {
	mu     sync.Mutex
	free   map[string][]*sharedLease // by recipe path
	all    []*sharedLease
	client *api.Client
}

type sharedLease struct {
	lease *api.Lease
}

// Fresh returns the golden's data for this test alone, by the fastest
// mode a dbfork daemon offers (Instance.Mode says which): a slot built
// into the golden (ModeSlot, no work per test), a database
// cloned inside a leased server (ModeDatabase, milliseconds; dropped when
// t ends), or an instance reset in place before the test (ModeReset; the
// DSN stays the same from test to test). Leases are shared between the
// tests of a process, one per test running at a time. Without a daemon it
// is Open (ModeLease).
func Fresh(t testing.TB, recipePath string) *Instance {
	t.Helper()
	abs, err := filepath.Abs(recipeOr(recipePath))
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := sharedClient(ctx, t)
	if c == nil {
		in := Open(t, recipePath)
		in.Mode = ModeLease
		return in
	}
	sl := takeShared(ctx, t, c, abs)
	t.Cleanup(func() { putShared(abs, sl) })
	// The daemon decides how (POST /v1/leases/{id}/fresh): the next
	// slot of the golden, a database cloned in the server, nothing (an
	// untouched lease) or a reset in place.
	fd, err := c.Fresh(ctx, sl.lease.ID)
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	in := &Instance{ID: sl.lease.ID, DSN: fd.DSN, Env: fd.Env, Backend: sl.lease.Backend, Mode: fd.Mode}
	switch fd.Mode {
	case api.ModeNone: // the lease's own database, as the golden has it
		in.Mode = ModeReset
	case api.ModeSlot, api.ModeDatabase:
		in.Database = fd.Name
	}
	if fd.Mode == api.ModeDatabase {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.DropDatabase(ctx, sl.lease.ID, fd.Name) // early; else the next call drops it
		})
	}
	return in
}

// sharedClient finds the daemon once per process (nil: there is none to
// find, work in the test process).
func sharedClient(ctx context.Context, t testing.TB) *api.Client {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.client != nil {
		return shared.client
	}
	sock, found, err := daemonSocket(ctx)
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	if !found {
		return nil
	}
	c, err := api.Dial(ctx, sock)
	if err != nil {
		t.Fatalf("dbforktest: daemon at %s: %v", sock, err)
	}
	shared.client = c
	return c
}

func takeShared(ctx context.Context, t testing.TB, c *api.Client, recipePath string) *sharedLease {
	t.Helper()
	shared.mu.Lock()
	if free := shared.free[recipePath]; len(free) > 0 {
		sl := free[len(free)-1]
		shared.free[recipePath] = free[:len(free)-1]
		shared.mu.Unlock()
		return sl
	}
	shared.mu.Unlock()
	l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: recipePath, Env: api.Environ(), Backend: os.Getenv(BackendEnv)})
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	sl := &sharedLease{lease: l}
	shared.mu.Lock()
	shared.all = append(shared.all, sl)
	shared.mu.Unlock()
	return sl
}

func putShared(recipePath string, sl *sharedLease) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.free == nil {
		shared.free = map[string][]*sharedLease{}
	}
	shared.free[recipePath] = append(shared.free[recipePath], sl)
}

// Close ends the leases Fresh shares (call it from TestMain after m.Run;
// otherwise they end with the test process).
func Close() {
	shared.mu.Lock()
	all, c := shared.all, shared.client
	shared.all, shared.free, shared.client = nil, nil, nil
	shared.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, sl := range all {
		_ = c.Release(ctx, sl.lease.ID)
	}
}
