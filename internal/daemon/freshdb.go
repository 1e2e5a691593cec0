package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
)

// Fresh databases: on a server that clones databases cheaply, the pool
// gives each instance an idle template copy of the golden's database
// (templateDB) and a few databases cloned from it ahead of need (spareDBs);
// a lease hands them out one per call and clones the next in the
// background, so a test never waits for one.
//
// Cloning is what a waiting test needs; dropping a used database is not.
// So a lease clones up to cloneStreams databases at once (PostgreSQL 18
// runs CREATE DATABASE from one template in parallel: 20 in 0.72 s on two
// streams against 0.45 s for 10 on one, on two cores) and drops the
// databases its tests are done with only when its spares are full, or once
// more than maxDropsLater wait: a burst of short tests then pays for
// clones alone (a drop of the 1.5 GB bench database costs ~12 ms, a
// clone ~40 ms), and what a lease never drops goes with its clone.
const (
	templateDB    = "dbfork_template"
	spareDBs      = 4
	cloneStreams  = 2
	maxDropsLater = 32
	dropBatch     = 4
)

// spares are the fresh databases of one instance.
type spares struct {
	mu     sync.Mutex
	ready  []string        // cloned, never handed out
	handed map[string]bool // handed out and not dropped
	drops  []string        // done with, to drop when nothing is to be cloned
	closes []string        // done with, their connections not broken yet
	wake   chan struct{}   // a database was taken or given back: clone or drop
	// server is the instance's server; a whole-instance reset replaces
	// it (remakeSpares) while refill and handlers read it. It is nil
	// while that reset runs, and gen counts the servers, so a database
	// cloned on the old one is never handed out.
	server *engine.Server
	gen    int
}

// invalidate forgets the spares of a server a whole-instance reset is
// about to replace.
func (sp *spares) invalidate() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.server, sp.ready, sp.handed, sp.drops, sp.closes = nil, nil, map[string]bool{}, nil, nil
	sp.gen++
}

// dropLater queues a database of server srv to be dropped by the lease's
// refill loop, and its connections to be broken before that (a test's
// pool of idle connections would otherwise hold server slots until the
// drop); one of an older server is forgotten (it went with its clone).
func (sp *spares) dropLater(srv *engine.Server, name string) {
	sp.mu.Lock()
	if sp.server == srv {
		sp.drops = append(sp.drops, name)
		sp.closes = append(sp.closes, name)
	}
	sp.mu.Unlock()
	sp.poke()
}

// job is what the refill loop does next, on server srv of generation
// gen: break the connections of the databases in close, else clone
// clone databases, else drop the ones in drop. All zero: nothing to do.
type job struct {
	close, drop []string
	clone       int
	srv         *engine.Server
	gen         int
}

// work takes the next job: closing given-back databases first (one
// quick statement each), then cloning up to spareDBs, then dropping up
// to dropBatch given-back ones — before cloning once more than
// maxDropsLater wait.
func (sp *spares) work() job {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	j := job{srv: sp.server, gen: sp.gen}
	if sp.server == nil {
		return job{gen: sp.gen} // a reset remakes the server (and pokes)
	}
	if len(sp.closes) > 0 {
		j.close, sp.closes = sp.closes, nil
		return j
	}
	n := spareDBs - len(sp.ready)
	if len(sp.drops) > 0 && (n <= 0 || len(sp.drops) > maxDropsLater) {
		// A few at a time: a test that takes a spare meanwhile gets
		// its replacement cloned after this batch, not after all.
		k := min(len(sp.drops), dropBatch)
		j.drop, sp.drops = sp.drops[:k:k], sp.drops[k:]
		return j
	}
	j.clone = max(n, 0)
	return j
}

// take hands out a ready spare of server srv (none: "").
func (sp *spares) take(srv *engine.Server) string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.server != srv || len(sp.ready) == 0 {
		return ""
	}
	name := sp.ready[0]
	sp.ready = sp.ready[1:]
	return name
}

// srv is the instance's server now.
func (sp *spares) srv() *engine.Server {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.server
}

func newSpares() *spares {
	return &spares{handed: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (sp *spares) poke() {
	select {
	case sp.wake <- struct{}{}:
	default:
	}
}

func newDBNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = newDBName()
	}
	return out
}

func newDBName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "t_" + hex.EncodeToString(b)
}

// clonesDatabases says whether instances of e can hand out fresh
// databases: the engine can, and the clone's filesystem shares extents
// (probed once per pool by really cloning a file there).
func (d *Daemon) clonesDatabases(ctx context.Context, e *entry, st *instance.State) (engine.DatabaseCloner, bool) {
	dc, ok := e.eng.(engine.DatabaseCloner)
	if !ok || !dc.ClonesDatabases() {
		return nil, false
	}
	e.dbOnce.Do(func() {
		err := backend.FilesShareExtents(ctx, st.Dir)
		e.dbShares = err == nil
		if err != nil {
			d.o.Log.Info("no fresh databases: the store does not share extents; leases reset instead", "pool", e.id, "err", err)
		}
	})
	return dc, e.dbShares
}

// prepareFresh makes the template and the first spare databases of a
// warming instance. A failure only costs the fast path: the instance
// then resets instead.
func (d *Daemon) prepareFresh(ctx context.Context, e *entry, in *instance.Instance) {
	d.noteWAL(ctx, e, in)
	if len(e.golden.Manifest.Slots) > 0 {
		// Its tests get slots, and a lease whose slots run low moves to
		// a replacement instance (freshahead.go): spares cloned ahead
		// would cost each instance 5 clones of the database (~40 ms of
		// the server's CPU each) that its tests never take. The admin
		// connection the fresh call closes databases over is made now,
		// not by the lease's first call.
		if dc, ok := e.eng.(engine.DatabaseCloner); ok {
			if err := dc.CloseDatabases(ctx, in.State.Server, nil); err != nil && ctx.Err() == nil {
				d.o.Log.Debug("admin connection not made ahead", "id", in.State.ID, "err", err)
			}
		}
		return
	}
	dc, ok := d.clonesDatabases(ctx, e, in.State)
	if !ok {
		return
	}
	srv := in.State.Server
	sp := newSpares()
	sp.server = srv
	err := dc.MakeTemplate(ctx, srv, templateDB)
	if err == nil {
		err = dc.CloneDatabases(ctx, srv, templateDB, newDBNames(spareDBs), func(name string) { sp.ready = append(sp.ready, name) })
	}
	if err != nil {
		if ctx.Err() == nil { // not the pool closing or shrinking meanwhile
			d.o.Log.Warn("fresh databases unavailable for this instance; it resets instead", "id", in.State.ID, "err", err)
		}
		return
	}
	d.mu.Lock()
	d.spares[in.State.ID] = sp
	d.mu.Unlock()
}

// refill keeps spareDBs databases ready for a lease until it ends, and
// drops the databases its tests gave back (spares first). Failures are
// retried after a pause that doubles up to 5 s.
func (d *Daemon) refill(l *lease, dc engine.DatabaseCloner) {
	sp := l.spares
	const firstBackoff = 50 * time.Millisecond
	backoff := firstBackoff
	for {
		j := sp.work()
		var err error
		switch {
		case j.close != nil:
			err = dc.CloseDatabases(l.life, j.srv, j.close)
		case j.clone > 0:
			err = d.cloneSpares(l.life, dc, sp, j.srv, j.gen, j.clone)
		case j.drop != nil:
			err = dc.DropDatabases(l.life, j.srv, j.drop)
		default:
			select {
			case <-l.life.Done():
				return
			case <-sp.wake:
			}
			continue
		}
		if l.life.Err() != nil {
			return
		}
		if err == nil {
			backoff = firstBackoff
			continue
		}
		d.o.Log.Warn("fresh databases: closing, cloning or dropping failed", "id", l.ID, "err", err)
		select {
		case <-l.life.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// cloneSpares clones n spare databases on srv, up to cloneStreams at once.
func (d *Daemon) cloneSpares(ctx context.Context, dc engine.DatabaseCloner, sp *spares, srv *engine.Server, gen, n int) error {
	made := func(name string) {
		sp.mu.Lock()
		if sp.gen == gen {
			sp.ready = append(sp.ready, name)
		}
		sp.mu.Unlock()
	}
	streams := min(n, cloneStreams)
	errc := make(chan error, streams)
	for i := 0; i < streams; i++ {
		k := n / streams
		if i < n%streams {
			k++
		}
		go func() { errc <- dc.CloneDatabases(ctx, srv, templateDB, newDBNames(k), made) }()
	}
	var first error
	for i := 0; i < streams; i++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CreateDatabase implements api.Service.
func (d *Daemon) CreateDatabase(ctx context.Context, id string, peer api.Peer) (*api.Database, error) {
	t0 := time.Now()
	l, err := d.find(id, peer)
	if err != nil {
		return nil, err
	}
	dc, _ := l.entry.eng.(engine.DatabaseCloner)
	if l.Fresh != api.FreshDatabase || l.spares == nil || dc == nil {
		return nil, errs.Unsupported("lease %s cannot hand out fresh databases (its \"fresh\" is %q: that needs PostgreSQL 18 or later on a store that shares extents); reset it instead (POST /v1/leases/%s/reset)", id, l.Fresh, id)
	}
	sp := l.spares
	sp.mu.Lock()
	var name string
	srv, gen := sp.server, sp.gen
	if len(sp.ready) > 0 {
		name, sp.ready = sp.ready[0], sp.ready[1:]
	}
	sp.mu.Unlock()
	if srv == nil {
		return nil, errs.Busy("lease %s is being reset; ask again once the reset has returned", id)
	}
	onDemand := name == ""
	if onDemand { // taken faster than cloned: clone one now
		name = newDBName()
		if err := dc.CloneDatabases(ctx, srv, templateDB, []string{name}, nil); err != nil {
			if l.life.Err() != nil {
				return nil, errs.NotFound("lease %s ended", id)
			}
			return nil, fmt.Errorf("fresh database for lease %s: %w", id, err)
		}
	}
	sp.mu.Lock()
	if sp.gen != gen {
		sp.mu.Unlock()
		return nil, errs.Busy("lease %s was reset while its fresh database was made; ask again", id)
	}
	sp.handed[name] = true
	sp.mu.Unlock()
	sp.poke()
	conn := dc.ConnTo(srv, name)
	db := &api.Database{Name: name, DSN: conn.URL, SocketDSN: conn.SocketURL, Env: d.clientEnv(conn.Env, peer), OnDemand: onDemand}
	db.Env["DBFORK_INSTANCE"] = id
	db.Ms = msSince(t0)
	return db, nil
}

// DropDatabase implements api.Service. The name is gone from the lease at
// once; the lease's refill loop breaks the database's connections next,
// and drops it once no spare is to be cloned (maxDropsLater), or it goes
// with the lease's clone.
func (d *Daemon) DropDatabase(ctx context.Context, id, name string, peer api.Peer) error {
	l, err := d.find(id, peer)
	if err != nil {
		return err
	}
	if l.spares == nil {
		return errs.Unsupported("lease %s has no fresh databases (its \"fresh\" is %q)", id, l.Fresh)
	}
	sp := l.spares
	sp.mu.Lock()
	ok := sp.handed[name]
	delete(sp.handed, name)
	sp.mu.Unlock()
	if !ok {
		return errs.NotFound("lease %s has no fresh database %q (dropped already, or never handed out)", id, name)
	}
	if srv := sp.srv(); srv != nil {
		sp.dropLater(srv, name)
	} // else a whole-instance reset is under way: the database goes with the old clone
	return nil
}
