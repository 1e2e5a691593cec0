package dbforktest

import (
	"context"
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
	// ModeInstance: a whole instance of its own (New; or Fresh without a
	// daemon).
	ModeInstance = "instance"
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
	used  bool // handed to a test since its last reset
}

// Fresh returns the golden's data for this test alone, by the fastest
// mode a dbfork daemon offers (Instance.Mode says which): a database
// cloned inside a leased server (ModeDatabase, milliseconds; dropped when
// t ends), or an instance reset in place before the test (ModeReset; the
// DSN stays the same from test to test). Leases are shared between the
// tests of a process, one per test running at a time. Without a daemon it
// is Open (ModeInstance).
func Fresh(t testing.TB, recipePath string) *Instance {
	t.Helper()
	abs, err := filepath.Abs(recipePath)
	if err != nil {
		t.Fatalf("dbforktest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c := sharedClient(ctx, t)
	if c == nil {
		in := Open(t, recipePath)
		in.Mode = ModeInstance
		return in
	}
	sl := takeShared(ctx, t, c, abs)
	t.Cleanup(func() { putShared(abs, sl) })
	if sl.lease.Fresh == api.FreshDatabase {
		db, err := c.CreateDatabase(ctx, sl.lease.ID)
		if err != nil {
			t.Fatalf("dbforktest: %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = c.DropDatabase(ctx, sl.lease.ID, db.Name) // a lease that ended took it along
		})
		return &Instance{ID: sl.lease.ID, DSN: db.DSN, Env: db.Env, Backend: sl.lease.Backend, Mode: ModeDatabase, Database: db.Name}
	}
	if sl.used {
		l, err := c.Reset(ctx, sl.lease.ID)
		if err != nil {
			t.Fatalf("dbforktest: %v", err)
		}
		sl.lease = l
	}
	sl.used = true
	return &Instance{ID: sl.lease.ID, DSN: sl.lease.DSN, Env: sl.lease.Env, Backend: sl.lease.Backend, Mode: ModeReset}
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
	l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: recipePath, Env: api.Environ()})
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
