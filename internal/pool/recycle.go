package pool

import (
	"context"
	"errors"
	"time"
)

// recycleLocked turns a leased slot back into a warming one whose item
// Recycle makes from the released one. The old id is gone at once.
func (p *Pool[T]) recycleLocked(s *slot[T]) {
	ctx, cancel := context.WithCancel(context.Background())
	delete(p.byID, s.id)
	old := s.item
	var zero T
	s.state, s.since, s.cancel, s.item, s.id, s.released = Warming, time.Now(), cancel, zero, "", true
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		item, err := p.f.Recycle(ctx, old)
		op := "recycle"
		if errors.Is(err, ErrRecreate) {
			item, op, err = p.create(ctx)
		}
		cancel()
		p.settle(s, item, err, op)
	}()
	p.broadcastLocked()
}

// settle ends a warming slot with what Create or Recycle made.
func (p *Pool[T]) settle(s *slot[T], item T, err error, op string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.broadcastLocked()
	if err != nil {
		delete(p.slots, s)
		if !p.closed {
			if op == "create" { // a failed recycle says nothing of creates
				p.lastErr, p.failGen, p.failures = err, p.failGen+1, p.failures+1
				backoff := p.cfg.Backoff << min(p.failures-1, 5)
				p.retryAt = time.Now().Add(min(backoff, 30*time.Second))
			}
			p.f.OnError(op, err)
			p.fillLocked()
		}
		return
	}
	if op == "create" {
		p.failures = 0 // a recycle says nothing about creates
	}
	s.item, s.id = item, p.f.ID(item)
	p.byID[s.id] = s
	// An item made from a released one that nobody needs (Min ready
	// already, no one waiting, no lease to take it as its second) goes,
	// as a released one did before recycling: a shrunk or retired pool
	// drains.
	fromRelease := s.released
	s.released = false
	if p.closed || (fromRelease && p.countLocked(Ready) >= p.reserveLocked()) {
		p.discardLocked(s)
		return
	}
	s.state, s.since = Ready, time.Now()
}
