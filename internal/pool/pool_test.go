package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fake is a factory whose creates block until the test lets them finish,
// and which counts what exists, so tests can check nothing leaks.
type fake struct {
	mu        sync.Mutex
	next      int
	live      map[string]bool
	destroyed []string
	gate      chan error // each create takes one value: nil = succeed
	auto      bool       // creates succeed at once
	maxLive   int
}

type item struct{ id string }

func newFake(auto bool) *fake {
	return &fake{live: map[string]bool{}, gate: make(chan error, 100), auto: auto}
}

func (f *fake) factory() Factory[*item] {
	return Factory[*item]{
		Create: func(ctx context.Context) (*item, error) {
			if !f.auto {
				select {
				case err := <-f.gate:
					if err != nil {
						return nil, err
					}
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.next++
			it := &item{id: fmt.Sprintf("i%d", f.next)}
			f.live[it.id] = true
			f.maxLive = max(f.maxLive, len(f.live))
			return it, nil
		},
		Destroy: func(ctx context.Context, it *item) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if !f.live[it.id] {
				return fmt.Errorf("destroy of %s twice or of an unknown item", it.id)
			}
			delete(f.live, it.id)
			f.destroyed = append(f.destroyed, it.id)
			return nil
		},
		ID: func(it *item) string { return it.id },
	}
}

func (f *fake) liveCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live)
}

// assertMaxLive checks that at most limit items existed at once.
func (f *fake) assertMaxLive(t *testing.T, limit int, what string) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.maxLive > limit {
		t.Errorf("at most %d items existed at once, want <= %d (%s)", f.maxLive, limit, what)
	}
}

// assertBlocks checks that acquire (Acquire or AcquireAhead) finds
// nothing it may take within 50 ms.
func assertBlocks(t *testing.T, acquire func(context.Context) (*item, error), what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if it, err := acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: got %v, %v; want it to wait", what, it, err)
	}
}

// waiter starts a plain Acquire that blocks, and returns once the pool
// counts it as waiting; the item it gets comes on the channel.
func waiter(t *testing.T, p *Pool[*item]) <-chan *item {
	t.Helper()
	got := make(chan *item, 1)
	go func() {
		it, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- it
	}()
	waitFor(t, p, "a waiter", func(s Stats) bool { return s.Waiting == 1 })
	return got
}

// waitFor polls the pool's stats until cond holds.
func waitFor(t *testing.T, p *Pool[*item], what string, cond func(Stats) bool) Stats {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		ch := p.Changed()
		st := p.Stats()
		if cond(st) {
			return st
		}
		select {
		case <-ch:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out waiting for %s; stats %+v", what, st)
		}
	}
}

func closePool(t *testing.T, p *Pool[*item], f *fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.liveCount(); n != 0 {
		t.Fatalf("%d items left after Close", n)
	}
}

func TestWarmsMinAndReplacesReleased(t *testing.T) {
	f := newFake(true)
	p, err := New(Config{Min: 2, Max: 4}, f.factory())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "2 ready", func(s Stats) bool { return s.Ready == 2 })
	it, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := p.StateOf(it.id); st != Leased {
		t.Fatalf("acquired item is %s, want leased", st)
	}
	// A replacement warms so that 2 are ready again beside the lease.
	waitFor(t, p, "2 ready + 1 leased", func(s Stats) bool { return s.Ready == 2 && s.Leased == 1 })
	if err := p.Release(it.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "released item destroyed", func(s Stats) bool { return s.Leased == 0 && s.Discarding == 0 })
	f.mu.Lock()
	if len(f.destroyed) != 1 || f.destroyed[0] != it.id {
		t.Fatalf("destroyed %v, want [%s]", f.destroyed, it.id)
	}
	f.mu.Unlock()
	// Released items are never handed out again.
	for i := 0; i < 3; i++ {
		again, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if again.id == it.id {
			t.Fatal("a released item was leased again")
		}
	}
	if err := p.Release(it.id); !errors.Is(err, ErrUnknown) {
		t.Fatalf("second release: %v, want ErrUnknown", err)
	}
	closePool(t, p, f)
}

func TestMaxBoundsLiveItemsAndAcquireWaits(t *testing.T) {
	f := newFake(true)
	p, _ := New(Config{Min: 1, Max: 2}, f.factory())
	a, _ := p.Acquire(context.Background())
	b, _ := p.Acquire(context.Background())
	assertBlocks(t, p.Acquire, "third acquire with max=2")
	got := waiter(t, p)
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if c.id == a.id || c.id == b.id {
		t.Fatalf("waiter got %s, an item already leased or released", c.id)
	}
	f.assertMaxLive(t, 3, "2 leased + the released one while it is destroyed")
	closePool(t, p, f)
}

func TestFailedCreateReachesWaiterThenBacksOff(t *testing.T) {
	f := newFake(false)
	p, _ := New(Config{Min: 1, Max: 2, Backoff: time.Hour}, f.factory())
	// The spare the pool warms and the one started for the waiter both fail.
	f.gate <- errors.New("server would not start")
	f.gate <- errors.New("server would not start")
	_, err := p.Acquire(context.Background())
	if err == nil || err.Error() != "server would not start" {
		t.Fatalf("acquire after failed create: %v", err)
	}
	st := waitFor(t, p, "error recorded", func(s Stats) bool { return s.LastError != "" })
	if st.Warming != 0 {
		t.Fatalf("pool retried during its backoff: %+v", st)
	}
	// A new Acquire still gets its own attempt, and success clears the error.
	f.gate <- nil
	f.gate <- nil
	it, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st = waitFor(t, p, "refilled", func(s Stats) bool { return s.Ready == 1 })
	if st.LastError != "" {
		t.Fatalf("error kept after success: %q", st.LastError)
	}
	_ = p.Release(it.id)
	closePool(t, p, f)
}

func TestCloseDuringWarmingDestroysLateItems(t *testing.T) {
	f := newFake(false)
	p, _ := New(Config{Min: 3, Max: 3}, f.factory())
	waitFor(t, p, "3 warming", func(s Stats) bool { return s.Warming == 3 })
	// One create finishes, but ignores cancellation: it completes after Close began.
	f.gate <- nil
	waitFor(t, p, "1 ready", func(s Stats) bool { return s.Ready == 1 })
	closePool(t, p, f)
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
}

func TestReleaseWhileReplacementWarms(t *testing.T) {
	f := newFake(false)
	p, _ := New(Config{Min: 1, Max: 2}, f.factory())
	f.gate <- nil
	it, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "replacement warming", func(s Stats) bool { return s.Warming == 1 && s.Leased == 1 })
	if err := p.Release(it.id); err != nil {
		t.Fatal(err)
	}
	st := waitFor(t, p, "release done", func(s Stats) bool { return s.Leased == 0 && s.Discarding == 0 })
	if st.Warming != 1 {
		t.Fatalf("release during warming started extra creates: %+v", st)
	}
	f.gate <- nil
	waitFor(t, p, "replacement ready", func(s Stats) bool { return s.Ready == 1 && s.Warming == 0 })
	closePool(t, p, f)
}

func TestShutdownWithLeasesOut(t *testing.T) {
	f := newFake(true)
	p, _ := New(Config{Min: 1, Max: 4}, f.factory())
	var ids []string
	for i := 0; i < 3; i++ {
		it, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, it.id)
	}
	closePool(t, p, f)
	for _, id := range ids {
		if err := p.Release(id); !errors.Is(err, ErrClosed) {
			t.Fatalf("release after close: %v, want ErrClosed", err)
		}
	}
}

func TestForgetHandsItemOver(t *testing.T) {
	f := newFake(true)
	p, _ := New(Config{Min: 0, Max: 1}, f.factory())
	it, _ := p.Acquire(context.Background())
	kept, err := p.Forget(it.id)
	if err != nil || kept != it {
		t.Fatalf("forget: %v", err)
	}
	// Forgotten items no longer count against Max and survive Close.
	other, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Release(other.id)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.Close(ctx)
	if f.liveCount() != 1 {
		t.Fatalf("live items %d, want only the forgotten one", f.liveCount())
	}
}

func TestResizeAndBadConfig(t *testing.T) {
	if _, err := New(Config{Min: 3, Max: 2}, newFake(true).factory()); err == nil {
		t.Fatal("min > max accepted")
	}
	f := newFake(true)
	p, _ := New(Config{Min: 3, Max: 3}, f.factory())
	waitFor(t, p, "3 ready", func(s Stats) bool { return s.Ready == 3 })
	if err := p.Resize(Config{Min: 1, Max: 3}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "shrunk", func(s Stats) bool { return s.Ready == 1 && s.Discarding == 0 })
	if f.liveCount() != 1 {
		t.Fatalf("%d live after shrinking to 1", f.liveCount())
	}
	closePool(t, p, f)
}

// TestConcurrentClients hammers the pool: every lease is exclusive and
// nothing leaks.
func TestConcurrentClients(t *testing.T) {
	f := newFake(true)
	p, _ := New(Config{Min: 2, Max: 5}, f.factory())
	var holders sync.Map
	var wg sync.WaitGroup
	var cycles atomic.Int64
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				it, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if _, dup := holders.LoadOrStore(it.id, true); dup {
					t.Errorf("%s leased twice", it.id)
				}
				cycles.Add(1)
				if err := p.Release(it.id); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if cycles.Load() != 400 {
		t.Fatalf("%d cycles", cycles.Load())
	}
	f.assertMaxLive(t, 2*5, "2×max")
	closePool(t, p, f)
}

// A pool with Ahead makes and hands out items beyond Max only to
// AcquireAhead: plain callers still wait at Max, and a holder that moves
// to its second item (Release, then Promote) keeps the plain count at Max.
func TestAheadBeyondMaxOnlyForSecondItems(t *testing.T) {
	f := newFake(true)
	p, err := New(Config{Min: 0, Max: 2, Ahead: 2}, f.factory())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Acquire(context.Background())
	b, _ := p.Acquire(context.Background())
	assertBlocks(t, p.Acquire, "plain acquire past max=2 with ahead=2")
	// Each holder takes a second item, made past Max.
	soon, cancelSoon := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelSoon()
	a2, err := p.AcquireAhead(soon)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := p.AcquireAhead(soon)
	if err != nil {
		t.Fatal(err)
	}
	assertBlocks(t, p.AcquireAhead, "ahead acquire past max+ahead")
	if st := p.Stats(); st.Leased != 4 || st.Ahead != 2 {
		t.Fatalf("stats %+v, want 4 leased, ahead 2", st)
	}
	// A plain caller waits while both holders move to their second items.
	got := waiter(t, p)
	for _, mv := range [][2]*item{{a, a2}, {b, b2}} {
		if err := p.Release(mv[0].id); err != nil {
			t.Fatal(err)
		}
		if err := p.Promote(mv[1].id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case it := <-got:
		t.Fatalf("plain acquire got %s while 2 plain leases (max 2) were out", it.id)
	case <-time.After(100 * time.Millisecond):
	}
	if err := p.Promote("nope"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("promote of an unknown id: %v", err)
	}
	// A release of a plain lease lets the waiter in.
	if err := p.Release(a2.id); err != nil {
		t.Fatal(err)
	}
	if it := <-got; it.id == a2.id || it.id == b2.id {
		t.Fatalf("waiter got %s, an item already leased or released", it.id)
	}
	f.assertMaxLive(t, 2*4, "2×(max+ahead)")
	closePool(t, p, f)
}

// Before anyone calls AcquireAhead, Ahead keeps an item ready past Max
// for each plain lease's second one; a plain caller cannot take it.
func TestAheadKeepsReservePastMax(t *testing.T) {
	f := newFake(true)
	p, _ := New(Config{Min: 1, Max: 1, Ahead: 1}, f.factory())
	if _, err := p.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "1 leased + 1 ready", func(s Stats) bool { return s.Leased == 1 && s.Ready == 1 })
	assertBlocks(t, p.Acquire, "plain acquire of the reserve past max")
	soon, cancelSoon := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelSoon()
	if _, err := p.AcquireAhead(soon); err != nil {
		t.Fatal(err)
	}
	closePool(t, p, f)
}
