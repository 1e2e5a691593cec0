package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/proc"
)

// Admin connections. The daemon's fresh call closes the database the
// last test used before it answers (so a pool the app kept fails instead
// of reading that test's rows): over a new connection that cost ~4 ms
// of the call's 4.5 ms (a backend forked and authenticated per call), so
// each running server keeps one connection for these statements. It is
// to the "postgres" database, which tests do not use as a template (a
// session on template1 would make a test's plain CREATE DATABASE fail),
// and is made again when a test or a reset ended it.

type adminConn struct {
	mu     sync.Mutex // one statement sequence at a time
	c      *pgx.Conn
	server proc.Identity
}

var admins struct {
	mu sync.Mutex
	m  map[string]*adminConn
}

// withAdmin runs do over srv's admin connection, made on first use. A
// connection found closed (a test or a reset terminated it) is made again
// once. For a recipe whose own database is "postgres" it connects per
// call to template1, as closing that database would end the connection.
func withAdmin(ctx context.Context, srv *engine.Server, do func(*pgx.Conn) error) error {
	if srv.Database == "postgres" {
		c, err := connect(ctx, srv, "template1")
		if err != nil {
			return err
		}
		defer c.Close(context.Background())
		return do(c)
	}
	a := adminFor(srv)
	a.mu.Lock()
	defer a.mu.Unlock()
	for try := 0; ; try++ {
		if a.c == nil || a.c.IsClosed() {
			c, err := connect(ctx, srv, "postgres")
			if err != nil {
				return err
			}
			a.c = c
			urgent(srv, int(c.PgConn().PID()))
		}
		err := do(a.c)
		if err == nil || !a.c.IsClosed() || try > 0 || ctx.Err() != nil {
			return err
		}
		// The connection died under the statements: they are all
		// idempotent (close, drop if exists), so run them again.
	}
}

// adminFor is srv's admin connection entry; entries of servers that are
// gone are closed on the way (servers come and go with instances).
func adminFor(srv *engine.Server) *adminConn {
	key := fmt.Sprintf("%s:%d:%d", srv.SocketDir, srv.Port, srv.Process.PID)
	admins.mu.Lock()
	defer admins.mu.Unlock()
	if admins.m == nil {
		admins.m = map[string]*adminConn{}
	}
	if a := admins.m[key]; a != nil {
		return a
	}
	// A new server: entries of servers that ended without Stop (which
	// drops its own) go now, once per server rather than per call.
	for k, a := range admins.m {
		if !a.server.Alive() {
			delete(admins.m, k)
			go a.close()
		}
	}
	a := &adminConn{server: srv.Process}
	admins.m[key] = a
	return a
}

func (a *adminConn) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c != nil {
		_ = a.c.Close(context.Background())
		a.c = nil
	}
}

// dropAdmin closes srv's admin connection (the server is stopping).
func dropAdmin(srv *engine.Server) {
	key := fmt.Sprintf("%s:%d:%d", srv.SocketDir, srv.Port, srv.Process.PID)
	admins.mu.Lock()
	a := admins.m[key]
	delete(admins.m, key)
	admins.mu.Unlock()
	if a != nil {
		a.close()
	}
}

// urgent gives the admin connection's backend the daemon's urgency
// (proc.Urgent) and the lowest real-time class (proc.Expedite): a test's
// fresh call waits on its statements, and each backend is a scheduling
// group of its own (PostgreSQL makes every child a session), one among
// the busy tests' backends. Its work is a few catalog updates per test,
// and only the daemon sends it statements. The nice value alone left the
// close's p99 inside the daemon at 22.6–26.4 ms at 8 clients on 2 cores;
// with the real-time class 3.6–4.0 ms (session 20). Only a child of srv's own postmaster is
// touched: the pid is the server's word. Without the right to (a
// rootless daemon) nothing changes.
func urgent(srv *engine.Server, pid int) {
	if pid <= 0 || proc.Parent(pid) != srv.Process.PID {
		return
	}
	_ = proc.Prioritize(pid, proc.Urgent)
	_ = proc.Expedite(pid)
}
