package daemon

import (
	"context"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
)

// A lease whose slots run low takes a second instance from its pool in
// the background, so that the fresh call that finds every slot used
// swaps instances (a pointer and a few fields) instead of resetting.
// Resetting in place ahead of need is not possible: the instance's
// server serves the test running in the last slot handed out.
//
// Leases of every engine and backend: a lease of a golden with slots has
// no spare databases (prepareFresh), and cloning one per call once the
// slots are used (PostgreSQL 18: ~40 ms of the server's CPU each, 10
// fresh databases a second at 8 clients here) costs far more than moving
// to an instance the pool made or recycled ahead.
// A ready instance is taken at once. When none is ready but one is being
// made or recycled (the pool's reserve went to other leases moving at
// the same time, as 8 tests in step do), or the pool has room to make
// one (pool.Config.Ahead: a lease's next instance does not count against
// max), the lease queues for it, unless callers of Acquire already wait:
// those come first.

// lowSlots: at most this share of the slots left (1/lowSlots) starts the
// replacement.
const lowSlots = 4

// replacementWait bounds how long a replacement that is still warming is
// waited for, by the fetch and by a fresh call that found every slot
// used: past it the lease is reset in place (a stop, restore and start
// on the caller's time, which the instance warming was going to take
// anyway).
const replacementWait = 5 * time.Second

// refreshAhead starts taking a replacement for l's instance when left
// slots of its golden's are all that remain unused. The caller holds l.op.
func (d *Daemon) refreshAhead(l *lease, left int) {
	st := &l.fr
	n := len(l.entry.golden.Manifest.Slots)
	if st.next != nil || st.fetching || left*lowSlots > n {
		return
	}
	ps := l.entry.pool.Stats()
	wait := 200 * time.Millisecond
	e := l.entry
	if ps.Ready == 0 {
		// One is coming when it warms, or when the pool has room to make
		// one for this lease (Config.Ahead).
		room := ps.Max + ps.Ahead - ps.Warming - ps.Leased
		if (ps.Warming == 0 && room <= 0) || ps.Waiting > int(e.queued.Load()) {
			return // nothing coming, or callers of Acquire wait for it: fall back later
		}
		wait = replacementWait
	}
	st.fetching = true
	done := make(chan struct{})
	st.fetched = done
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(l.life, wait)
		e.queued.Add(1)
		in, err := e.pool.AcquireAhead(ctx)
		e.queued.Add(-1)
		cancel()
		// Its own database is closed now, while no test waits: the call
		// that moves the lease there hands out a slot at once (the close
		// would otherwise make that call connect to the new server, the
		// slowest call of the 32). Nobody else gets this instance as it
		// is: released, it is restored or destroyed.
		closed := false
		if err == nil && l.life.Err() == nil {
			if dc, ok := l.entry.eng.(engine.DatabaseCloner); ok {
				srv := in.State.Server
				closed = dc.CloseDatabases(l.life, srv, []string{srv.Database}) == nil
			}
		}
		l.op.Lock()
		defer l.op.Unlock()
		st.fetching = false
		if err != nil {
			return
		}
		if l.life.Err() != nil || !in.State.Alive() {
			_ = l.entry.pool.Release(in.State.ID) // the lease ended meanwhile
			return
		}
		st.next, st.nextClosed = in, closed
		d.o.Log.Info("replacement ready for a lease low on slots", "id", l.ID, "instance", in.State.ID)
	}()
}

// awaitNext is for a fresh call that found every slot of l's instance
// used and no replacement in place: it starts taking one if the pool has
// one coming, and waits (without l.op) for the fetch under way. It
// reports false when the lease ended meanwhile. The caller holds l.op,
// and holds it again on return.
func (d *Daemon) awaitNext(l *lease) bool {
	st := &l.fr
	if st.next == nil && !st.fetching {
		d.refreshAhead(l, 0)
	}
	if st.next != nil || !st.fetching {
		return true
	}
	done := st.fetched
	l.op.Unlock()
	select {
	case <-done:
	case <-l.life.Done():
	}
	l.op.Lock()
	return l.life.Err() == nil
}

// swapNext puts the replacement in place of l's instance, whose every
// slot is used: that one goes back to the pool (destroyed). The lease
// keeps its id; its connection fields are the new instance's. The
// caller holds l.op.
func (d *Daemon) swapNext(l *lease) {
	st := &l.fr
	st.retiring.Wait() // closes of the old server's slots end first: no warnings from a server going away
	old := l.in
	l.in, st.next = st.next, nil
	st.used, st.slot, st.walAt = 0, "", ""
	st.ownClosed, st.nextClosed = st.nextClosed, false // closed when it was taken, or open
	if at, ok := d.walAt.LoadAndDelete(l.in.State.ID); ok {
		st.walAt = at.(string)
	}
	_ = l.entry.pool.Release(old.State.ID)
	_ = l.entry.pool.Promote(l.in.State.ID) // a plain lease now: max counts it
	ns := l.in.State
	d.mu.Lock()
	if ns.Conn != nil {
		l.DSN, l.SocketDSN = ns.Conn.URL, ns.Conn.SocketURL
	}
	l.Env = d.clientEnv(ns.ClientEnv(), peerOfLease(l))
	l.Env["DBFORK_INSTANCE"] = l.ID // lease calls go by the lease's id
	l.InstanceDir, l.Backend = ns.Dir, ns.Backend
	d.mu.Unlock()
	d.o.Log.Info("lease moved to its replacement instance", "id", l.ID, "old", old.State.ID, "instance", ns.ID)
}

// dropNext gives back a replacement the lease will not use (it ends).
// The caller holds l.op.
func (l *lease) dropNext() {
	if in := l.fr.next; in != nil {
		l.fr.next = nil
		_ = l.entry.pool.Release(in.State.ID)
	}
}

// peerOfLease is the lease's holder as clientEnv needs it: a socket peer
// of uid owner, or a TCP caller (owner -1).
func peerOfLease(l *lease) api.Peer {
	return api.Peer{Unix: l.owner >= 0, UID: max(l.owner, 0)}
}
