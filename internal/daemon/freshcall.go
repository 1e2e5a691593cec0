package daemon

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
)

// freshState is what a lease's fresh calls remember; l.op guards it.
type freshState struct {
	calls int    // fresh calls so far
	used  int    // slots of this instance handed out since it was last made or reset whole
	slot  string // the slot the last call handed out (retired by the next)
	db    string // the database the last call cloned (dropped by the next)
	// retiring counts slots whose connections are being closed in the
	// background: a whole-instance reset waits for them, or a late close
	// would shut a slot of the restored instance.
	retiring sync.WaitGroup
	// next is an instance taken from the pool ahead of need while the
	// slots ran low (freshahead.go); fetching: that is under way.
	next     *instance.Instance
	fetching bool
	fetched  chan struct{} // closed when the fetch under way ends
	// nextClosed: next's own database was closed when it was taken.
	nextClosed bool
	// walAt is the server's WAL position when the lease's database was
	// last known to be the golden's (warm, or just reset); "" unknown.
	// The same position now means no test wrote: nothing to do.
	walAt string
	// ownClosed: the lease's own database was closed to connections by
	// the first slot or database handed out (closeOwn); a reset or a new
	// instance opens it again.
	ownClosed bool
}

// walPositioner is an engine that can tell whether anything was written
// since a point (PostgreSQL: the WAL insert position).
type walPositioner interface {
	WALPosition(ctx context.Context, srv *engine.Server) (string, error)
}

// noteWAL records a warm instance's WAL position for its lease.
func (d *Daemon) noteWAL(ctx context.Context, e *entry, in *instance.Instance) {
	if wp, ok := e.eng.(walPositioner); ok {
		if at, err := wp.WALPosition(ctx, in.State.Server); err == nil {
			d.walAt.Store(in.State.ID, at)
		}
	}
}

// untouched says whether nothing was written on l's server since
// st.walAt. The caller holds l.op.
func (l *lease) untouched() bool {
	wp, ok := l.entry.eng.(walPositioner)
	if !ok || l.fr.walAt == "" {
		return false
	}
	at, err := wp.WALPosition(l.life, l.in.State.Server)
	return err == nil && at == l.fr.walAt
}

// noteReset records l's WAL position after its database was reset (or
// found untouched). The caller holds l.op.
func (l *lease) noteReset() {
	l.fr.walAt = ""
	if wp, ok := l.entry.eng.(walPositioner); ok {
		if at, err := wp.WALPosition(l.life, l.in.State.Server); err == nil {
			l.fr.walAt = at
		}
	}
}

// Fresh implements api.Service: the next test of a lease gets fresh data,
// the cheapest way this lease has, decided here rather than in every
// client: the next unused slot built into the golden (no work at all);
// else a database cloned in the server (PostgreSQL 18 on a store that
// shares extents: a spare cloned ahead, as cheap as handing out the
// lease's own, which stays the golden's for resets); else nothing, when
// the server wrote no WAL since the lease was handed out or last reset
// (its database is the golden's: writes to a golden's unlogged tables
// are the one thing this misses); else the instance reset in place, which
// also makes every slot unused again. A slot
// handed out is never handed out again before such a reset. Like Reset,
// the work runs under the lease: a caller that gives up leaves no
// half-done call behind.
func (d *Daemon) Fresh(ctx context.Context, id string, peer api.Peer) (*api.FreshDB, error) {
	t0 := time.Now()
	l, err := d.find(id, peer)
	if err != nil {
		return nil, err
	}
	type answer struct {
		db  *api.FreshDB
		err error
	}
	done := make(chan answer, 1)
	go func() {
		db, err := d.fresh(l, peer)
		done <- answer{db, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			return nil, a.err
		}
		a.db.Ms = msSince(t0)
		return a.db, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("fresh data for lease %s: %w (the call goes on without you)", id, ctx.Err())
	}
}

func (d *Daemon) fresh(l *lease, peer api.Peer) (*api.FreshDB, error) {
	l.op.Lock()
	if l.life.Err() != nil {
		l.op.Unlock()
		return nil, errs.NotFound("no lease %s (released while the call waited)", l.ID)
	}
	st := &l.fr
	st.calls++
	if st.db != "" { // the previous test's database goes (later, in the refill loop)
		d.closeNow(l, st.db)
		_ = d.DropDatabase(l.life, l.ID, st.db, peer)
		st.db = ""
	}
	d.retireSlot(l)
	slots := l.entry.golden.Manifest.Slots
	dc, _ := l.entry.eng.(engine.DatabaseCloner)
	if st.used == len(slots) && dc != nil && len(slots) > 0 && !d.awaitNext(l) {
		l.op.Unlock()
		return nil, errs.NotFound("no lease %s (released while the call waited)", l.ID)
	}
	if st.used == len(slots) && st.next != nil {
		d.swapNext(l)
	}
	if st.used < len(slots) && dc != nil {
		d.refreshAhead(l, len(slots)-st.used-1)
		name := slots[st.used]
		st.used++
		st.slot = name
		left := len(slots) - st.used
		srv := l.in.State.Server
		d.closeOwn(l, dc, srv)
		l.op.Unlock()
		return d.freshDB(l, api.ModeSlot, dc.ConnTo(srv, name), srv, name, left, peer), nil
	}
	left := len(slots) - st.used
	if l.spares != nil {
		l.op.Unlock() // CreateDatabase runs beside the lease's other calls
		db, err := d.CreateDatabase(l.life, l.ID, peer)
		if err != nil {
			return nil, err
		}
		l.op.Lock()
		if st.db != "" { // a call beside this one made one too: that test is over
			_ = d.DropDatabase(l.life, l.ID, st.db, peer)
		}
		st.db = db.Name
		srv := l.in.State.Server
		d.closeOwn(l, dc, srv)
		l.op.Unlock()
		return d.freshDB(l, api.ModeDatabase, dc.ConnTo(srv, db.Name), srv, db.Name, left, peer), nil
	}
	if l.untouched() {
		srv := l.in.State.Server
		l.op.Unlock()
		return d.freshDB(l, api.ModeNone, *l.in.State.Conn, srv, srv.Database, left, peer), nil
	}
	err := d.resetLocked(l) // unlocks l.op
	if err != nil {
		return nil, err
	}
	l.op.Lock()
	srv, conn := l.in.State.Server, *l.in.State.Conn
	left = len(slots) - st.used
	l.op.Unlock()
	return d.freshDB(l, api.ModeReset, conn, srv, srv.Database, left, peer), nil
}

// retireSlot closes the connections of the slot the last call handed
// out, and closes the slot to new ones, before the call answers: its test is
// over, and a client that died or kept a pool of idle connections would
// otherwise hold server connections (and could write into a used slot).
// The caller holds l.op.
func (d *Daemon) retireSlot(l *lease) {
	st := &l.fr
	name := st.slot
	st.slot = ""
	dc, ok := l.entry.eng.(engine.DatabaseCloner)
	if name == "" || !ok {
		return
	}
	srv := l.in.State.Server
	st.retiring.Add(1)
	defer st.retiring.Done()
	if err := dc.CloseDatabases(l.life, srv, []string{name}); err != nil && l.life.Err() == nil {
		d.o.Log.Warn("closing a used slot failed", "id", l.ID, "slot", name, "err", err)
	}
}

// closeNow closes the database the last call handed out before the call
// answers: a connection the app kept from the test before fails in the
// next one instead of showing it that test's rows until the drop (which
// runs later) comes. The caller holds l.op.
func (d *Daemon) closeNow(l *lease, name string) {
	dc, ok := l.entry.eng.(engine.DatabaseCloner)
	if !ok || l.in == nil || l.in.State.Server == nil {
		return
	}
	if err := dc.CloseDatabases(l.life, l.in.State.Server, []string{name}); err != nil && l.life.Err() == nil {
		d.o.Log.Warn("closing the last fresh database failed", "id", l.ID, "database", name, "err", err)
	}
}

// closeOwn closes the lease's own database to connections, and ends the
// ones it has, once the lease hands out a slot or a cloned database: a
// pool the app built from DATABASE_URL before the fresh call would
// otherwise go on using it, and each test would see the rows of the ones
// before it with nothing failing. Its next query fails instead ("not
// currently accepting connections"). The caller holds l.op.
func (d *Daemon) closeOwn(l *lease, dc engine.DatabaseCloner, srv *engine.Server) {
	if l.fr.ownClosed {
		return
	}
	if err := dc.CloseDatabases(l.life, srv, []string{srv.Database}); err != nil {
		d.o.Log.Warn("closing the lease's own database failed", "id", l.ID, "err", err)
		return
	}
	l.fr.ownClosed = true
}

// wholeReset is told by reset that the instance was put back whole: every
// slot is unused again. The caller holds l.op.
func (l *lease) wholeReset() {
	l.fr.used, l.fr.slot = 0, ""
	l.fr.ownClosed = false
}

// freshDB is the answer of a fresh call for database name of srv.
func (d *Daemon) freshDB(l *lease, mode string, conn engine.Conn, srv *engine.Server, name string, left int, peer api.Peer) *api.FreshDB {
	db := &api.FreshDB{Mode: mode, Name: name, DSN: conn.URL, SocketDSN: conn.SocketURL, Env: d.clientEnv(conn.Env, peer), SlotsLeft: left}
	db.Env["DBFORK_INSTANCE"] = l.ID
	db.Conn = api.Conn{Host: "127.0.0.1", Port: srv.Port, User: srv.User, Password: srv.Password, Database: name}
	if socketOK(peer) {
		db.Conn.Socket = srv.SocketDir
	}
	return db
}

// socketOK says whether the caller may use an instance's socket (see
// clientEnv).
func socketOK(peer api.Peer) bool {
	return peer.Unix && (peer.UID == 0 || peer.UID == os.Geteuid())
}
