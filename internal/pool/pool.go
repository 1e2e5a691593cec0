// Package pool keeps instances of one golden warm and hands them out.
//
// It is a state machine over slots, independent of what an item is (the
// daemon's items are instances; the tests' are fakes):
//
//	warming ──ok──▶ ready ──Acquire──▶ leased ──Release──▶ discarding ──▶ gone
//	   │  ▲             │                  │                   ▲
//	   │  └─── Recycle ─┼──────────────────┘                   │
//	   └──failed──▶ gone └────────────── Close ────────────────┘
//
// A released item is never handed out again as it is: it is destroyed,
// or, with Factory.Recycle, turned into a new item (new id) in the
// background, its slot warming meanwhile; that replaces a create. The pool
// keeps Min items ready or warming on top of the leased ones, never has
// more than Max items warming, ready or leased at once, and never more
// than 2×Max items alive counting those still being destroyed.
//
// Config.Ahead lets a pool hold up to that many items beyond Max for
// holders that will soon need a second one (AcquireAhead): a lease of a
// golden with slots takes its next instance while its tests use up the
// last slots of the current one. Max then still bounds the plain leases.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// State of a slot.
type State string

const (
	Warming    State = "warming"
	Ready      State = "ready"
	Leased     State = "leased"
	Discarding State = "discarding"
)

// ErrClosed is returned by calls on a closed pool.
var ErrClosed = errors.New("pool is shut down")

// ErrRecreate is what Factory.Recycle returns when it destroyed the old
// item without making a new one because it cannot (not a failure): the
// slot then makes one with Create.
var ErrRecreate = errors.New("item cannot be recycled; create a new one")

// ErrUnknown is returned by Release for an id the pool did not lease.
var ErrUnknown = errors.New("no such lease in this pool")

// Config sizes a pool.
type Config struct {
	Min int // kept ready or warming besides the leased ones
	Max int // warming + ready + leased at most (beyond Ahead's share)
	// Ahead is how many items beyond Max the pool may hold for
	// AcquireAhead callers; plain Acquire calls still lease at most Max.
	Ahead int
	// Backoff after a failed create before the pool refills itself again
	// (doubling up to 30 s). A waiting Acquire still gets one attempt.
	Backoff time.Duration
}

func (c Config) normal() (Config, error) {
	if c.Min < 0 || c.Max < 1 || c.Min > c.Max || c.Ahead < 0 {
		return c, fmt.Errorf("pool size min=%d max=%d ahead=%d: need 0 <= min <= max, max >= 1 and ahead >= 0", c.Min, c.Max, c.Ahead)
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	return c, nil
}

// Factory makes and destroys items. Create must honour ctx (the pool
// cancels it on Close); Destroy must release everything the item holds.
type Factory[T any] struct {
	Create  func(ctx context.Context) (T, error)
	Destroy func(ctx context.Context, item T) error
	ID      func(item T) string
	// Recycle, if set, turns a released item into a new one with a new
	// id, cheaper than Destroy and Create. Whatever it returns, the old
	// item must be gone (destroyed) when it returns; on error there is no
	// new item either.
	Recycle func(ctx context.Context, item T) (T, error)
	// Recyclable, if set, says whether Recycle can work on a released
	// item (asked under the pool's lock: it must be quick, a stat at most). Items it
	// rejects are destroyed in the background while a replacement is
	// created, as without Recycle: one waiting on the other would put
	// the destroy on the replacement's path.
	Recyclable func(item T) bool
	// OnError hears about failed creates and destroys (for logs).
	OnError func(op string, err error)
}

type slot[T any] struct {
	released bool // warming again after a release (Recycle)
	ahead    bool // leased by AcquireAhead, not yet Promoted
	state    State
	item     T
	id       string
	since    time.Time
	cancel   context.CancelFunc
}

// Pool is safe for concurrent use.
type Pool[T any] struct {
	f   Factory[T]
	mu  sync.Mutex
	cfg Config

	slots   map[*slot[T]]struct{}
	byID    map[string]*slot[T] // ready, leased and discarding slots
	waiting int                 // Acquire calls blocked for an item
	aheadW  int                 // of which AcquireAhead calls
	waitGen map[int]int         // blocked Acquire calls by the failGen they started at
	changed chan struct{}       // closed and replaced on every change

	closed   bool
	lastErr  error
	failGen  int // bumped on every failed create
	failures int // consecutive failed creates
	retryAt  time.Time
	timer    *time.Timer
	wg       sync.WaitGroup // warming and discarding goroutines
}

// New starts a pool and begins warming Min items.
func New[T any](cfg Config, f Factory[T]) (*Pool[T], error) {
	cfg, err := cfg.normal()
	if err != nil {
		return nil, err
	}
	if f.OnError == nil {
		f.OnError = func(string, error) {}
	}
	p := &Pool[T]{f: f, cfg: cfg, slots: map[*slot[T]]struct{}{}, byID: map[string]*slot[T]{}, waitGen: map[int]int{}, changed: make(chan struct{})}
	p.mu.Lock()
	p.fillLocked()
	p.mu.Unlock()
	return p, nil
}

// Resize changes the pool's bounds; extra ready items are discarded.
func (p *Pool[T]) Resize(cfg Config) error {
	cfg, err := cfg.normal()
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.cfg = cfg
	for s := range p.slots {
		if s.state == Ready && p.countLocked(Ready)+p.countLocked(Warming) > p.reserveLocked() {
			p.discardLocked(s)
		}
	}
	p.fillLocked()
	return nil
}

// Acquire hands out a ready item, waiting for one to warm if needed. It
// fails with the create error when the attempt made for it failed, and
// with ctx's error when ctx ends first.
func (p *Pool[T]) Acquire(ctx context.Context) (T, error) { return p.acquire(ctx, false) }

// AcquireAhead is Acquire for a holder's second item (see Config.Ahead):
// it may take the pool past Max, by up to Ahead items, and does not count
// towards the plain leases Max bounds until Promote.
func (p *Pool[T]) AcquireAhead(ctx context.Context) (T, error) { return p.acquire(ctx, true) }

// Promote makes an item AcquireAhead leased a plain lease: its holder
// released the one it had.
func (p *Pool[T]) Promote(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byID[id]
	if !ok || s.state != Leased {
		return ErrUnknown
	}
	s.ahead = false
	p.fillLocked()
	return nil
}

func (p *Pool[T]) acquire(ctx context.Context, ahead bool) (T, error) {
	var zero T
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.failGen
	p.waiting++
	p.waitGen[gen]++
	if ahead {
		p.aheadW++
	}
	leave := func() {
		p.waiting--
		if ahead {
			p.aheadW--
		}
		if p.waitGen[gen]--; p.waitGen[gen] == 0 {
			delete(p.waitGen, gen)
		}
	}
	for {
		if p.closed {
			leave()
			return zero, ErrClosed
		}
		mayTake := ahead || p.plainLeasedLocked() < p.cfg.Max
		for s := range p.slots {
			if s.state == Ready && mayTake {
				s.state, s.since, s.ahead = Leased, time.Now(), ahead
				leave()
				p.fillLocked()
				p.broadcastLocked()
				return s.item, nil
			}
		}
		if p.failGen != gen && p.countLocked(Warming) == 0 {
			leave()
			return zero, p.lastErr
		}
		p.fillLocked()
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
			p.mu.Lock()
		case <-ctx.Done():
			p.mu.Lock()
			leave()
			if p.failGen != gen && p.lastErr != nil {
				return zero, fmt.Errorf("%w (last attempt: %v)", ctx.Err(), p.lastErr)
			}
			return zero, ctx.Err()
		}
	}
}

// Release ends the lease on the item with id: it is recycled or
// destroyed in the background and a replacement is warmed.
func (p *Pool[T]) Release(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byID[id]
	if !ok || s.state != Leased {
		if p.closed {
			return ErrClosed
		}
		return ErrUnknown
	}
	if p.f.Recycle != nil && (p.f.Recyclable == nil || p.f.Recyclable(s.item)) {
		p.recycleLocked(s)
	} else {
		p.discardLocked(s)
	}
	p.fillLocked()
	return nil
}

// Forget ends the lease on id without destroying the item: its holder
// keeps it (`dbfork up` through the daemon, a kept failed test) and the
// pool no longer counts it.
func (p *Pool[T]) Forget(id string) (T, error) {
	var zero T
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byID[id]
	if !ok || s.state != Leased {
		return zero, ErrUnknown
	}
	delete(p.slots, s)
	delete(p.byID, id)
	p.fillLocked()
	p.broadcastLocked()
	return s.item, nil
}

// Close stops warming, destroys every item (leased ones too) and waits
// until all are gone or ctx ends.
func (p *Pool[T]) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		if p.timer != nil {
			p.timer.Stop()
		}
		for s := range p.slots {
			switch s.state {
			case Warming:
				s.cancel()
			case Ready, Leased:
				p.discardLocked(s)
			}
		}
		p.broadcastLocked()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool shutdown: %w", ctx.Err())
	}
}

// Stats is a snapshot of a pool (the API has its own wire copy, api.PoolStats).
type Stats struct {
	Min        int
	Max        int
	Ahead      int
	Warming    int
	Ready      int
	Leased     int
	Plain      int // of Leased, those not taken by AcquireAhead
	Discarding int
	Waiting    int
	AheadWait  int // of Waiting, AcquireAhead calls
	LastError  string
	Closed     bool
}

// Stats reports the pool's counts.
func (p *Pool[T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Stats{Min: p.cfg.Min, Max: p.cfg.Max, Ahead: p.cfg.Ahead, Waiting: p.waiting, AheadWait: p.aheadW, Closed: p.closed,
		Warming: p.countLocked(Warming), Ready: p.countLocked(Ready),
		Leased: p.countLocked(Leased), Plain: p.plainLeasedLocked(), Discarding: p.countLocked(Discarding)}
	if p.lastErr != nil && p.failures > 0 {
		st.LastError = p.lastErr.Error()
	}
	return st
}

// StateOf reports the state of the slot holding id.
func (p *Pool[T]) StateOf(id string) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.byID[id]
	if !ok {
		return "", false
	}
	return s.state, true
}

// Changed returns a channel closed at the next state change (for tests
// and for callers that wait on a pool).
func (p *Pool[T]) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// aheadLocked is what Config.Ahead adds: demand, the items to keep
// ready or warming for second items (one for each plain lease that has
// none yet, up to Ahead, or each AcquireAhead waiting if more), and
// limit, Max plus the second items the leases may hold or wait for.
// plain and leased are the plain and all leased items.
func (p *Pool[T]) aheadLocked(plain, leased int) (demand, limit int) {
	if p.cfg.Ahead == 0 {
		return p.aheadW, p.cfg.Max
	}
	second := leased - plain
	demand = max(p.aheadW, min(p.cfg.Ahead, plain)-second)
	return demand, p.cfg.Max + min(p.cfg.Ahead, max(plain, second+p.aheadW))
}

// reserveLocked is how many ready or warming items the pool keeps: Min,
// one per plain caller waiting, and what second items need (aheadLocked).
func (p *Pool[T]) reserveLocked() int {
	demand, _ := p.aheadLocked(p.plainLeasedLocked(), p.countLocked(Leased))
	return p.cfg.Min + p.waiting - p.aheadW + demand
}

// plainLeasedLocked counts the leased items that are not a holder's
// second (AcquireAhead) one.
func (p *Pool[T]) plainLeasedLocked() int {
	n := 0
	for s := range p.slots {
		if s.state == Leased && !s.ahead {
			n++
		}
	}
	return n
}

func (p *Pool[T]) countLocked(st State) int {
	n := 0
	for s := range p.slots {
		if s.state == st {
			n++
		}
	}
	return n
}

func (p *Pool[T]) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// fillLocked starts as many creates as the pool needs: Min spare items
// (unless it is backing off after failures) plus one per blocked Acquire
// that could take it, within Max (plus Ahead).
func (p *Pool[T]) fillLocked() {
	if p.closed {
		return
	}
	warming, ready, leased := p.countLocked(Warming), p.countLocked(Ready), p.countLocked(Leased)
	plain := p.plainLeasedLocked()
	demand, limit := p.aheadLocked(plain, leased)
	// Plain callers beyond what Max leaves them wait for a release, not
	// for an item made now (which only an AcquireAhead could take).
	servable := min(p.waiting-p.aheadW, max(0, p.cfg.Max-plain))
	// While backing off, only callers that arrived since the last failure
	// get an attempt of their own; the others have had theirs and fail.
	want := min(p.waitGen[p.failGen], servable+p.aheadW)
	if p.failures == 0 || !time.Now().Before(p.retryAt) {
		want = servable + p.cfg.Min + demand
	} else if p.timer == nil {
		p.timer = time.AfterFunc(time.Until(p.retryAt), func() {
			p.mu.Lock()
			p.timer = nil
			p.fillLocked()
			p.mu.Unlock()
		})
	}
	n := want - warming - ready
	if room := limit - warming - ready - leased; n > room {
		n = room
	}
	// Items still being destroyed hold memory and disk too: under heavy
	// churn the pool waits for them rather than owning more than 2×Max.
	if room := 2*limit - warming - ready - leased - p.countLocked(Discarding); n > room {
		n = room
	}
	for ; n > 0; n-- {
		p.startLocked()
	}
}

func (p *Pool[T]) startLocked() {
	ctx, cancel := context.WithCancel(context.Background())
	s := &slot[T]{state: Warming, since: time.Now(), cancel: cancel}
	p.slots[s] = struct{}{}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		item, op, err := p.create(ctx)
		cancel()
		p.settle(s, item, err, op)
	}()
}

// create runs Factory.Create for a warming slot; op names it for settle.
func (p *Pool[T]) create(ctx context.Context) (item T, op string, err error) {
	item, err = p.f.Create(ctx)
	return item, "create", err
}

// discardLocked moves a ready or leased slot to discarding and destroys
// its item in the background.
func (p *Pool[T]) discardLocked(s *slot[T]) {
	s.state, s.since = Discarding, time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := p.f.Destroy(ctx, s.item)
		cancel()
		if err != nil {
			p.f.OnError("destroy", err)
		}
		p.mu.Lock()
		delete(p.slots, s)
		delete(p.byID, s.id)
		p.fillLocked()
		p.broadcastLocked()
		p.mu.Unlock()
	}()
	p.broadcastLocked()
}
