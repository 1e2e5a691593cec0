package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// recycler adds Recycle to a fake: the old item is destroyed and a new
// one (new id) made; recycleGate holds each recycle until the test lets
// it finish (nil = succeed).
type recycler struct {
	*fake
	recycleGate chan error
	recycled    []string
	creates     int
	mu          sync.Mutex
}

func newRecycler() *recycler {
	return &recycler{fake: newFake(true), recycleGate: make(chan error, 100)}
}

func (r *recycler) factory() Factory[*item] {
	f := r.fake.factory()
	create := f.Create
	f.Create = func(ctx context.Context) (*item, error) {
		r.mu.Lock()
		r.creates++
		r.mu.Unlock()
		return create(ctx)
	}
	f.Recycle = func(ctx context.Context, old *item) (*item, error) {
		var gateErr error
		select {
		case gateErr = <-r.recycleGate:
		case <-ctx.Done():
			gateErr = ctx.Err()
		}
		if err := f.Destroy(ctx, old); err != nil {
			return nil, err
		}
		if gateErr != nil {
			return nil, gateErr
		}
		r.fake.mu.Lock()
		defer r.fake.mu.Unlock()
		r.fake.next++
		it := &item{id: fmt.Sprintf("r%d", r.fake.next)}
		r.fake.live[it.id] = true
		r.mu.Lock()
		r.recycled = append(r.recycled, old.id)
		r.mu.Unlock()
		return it, nil
	}
	return f
}

// leaseOne starts a pool of r's items and leases one.
func (r *recycler) leaseOne(t *testing.T, cfg Config) (*Pool[*item], *item) {
	t.Helper()
	p, err := New(cfg, r.factory())
	if err != nil {
		t.Fatal(err)
	}
	a, err := p.Acquire(context.Background())
	if err != nil {
		closePool(t, p, r.fake)
		t.Fatal(err)
	}
	return p, a
}

func (r *recycler) createCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.creates
}

func TestReleasedItemIsRecycledNotRecreated(t *testing.T) {
	r := newRecycler()
	p, a := r.leaseOne(t, Config{Min: 0, Max: 4})
	defer closePool(t, p, r.fake)
	creates := r.createCount()
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	// The old id is gone at once: a second release of it is refused.
	if err := p.Release(a.id); !errors.Is(err, ErrUnknown) {
		t.Fatalf("release of a recycling id: %v, want ErrUnknown", err)
	}
	if st := p.Stats(); st.Warming != 1 || st.Leased != 0 {
		t.Fatalf("while recycling: %+v, want 1 warming", st)
	}
	// A waiter gets the recycled item; the recycle stands in for a create.
	got := make(chan *item, 1)
	go func() {
		b, _ := p.Acquire(context.Background())
		got <- b
	}()
	waitFor(t, p, "a waiter", func(s Stats) bool { return s.Waiting == 1 })
	r.recycleGate <- nil
	b := <-got
	if b == nil || b.id == a.id || b.id[0] != 'r' {
		t.Fatalf("acquire got %v, want the recycled item (new id)", b)
	}
	if n := r.createCount() - creates; n != 0 {
		t.Fatalf("%d creates after the release, want none", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recycled) != 1 || r.recycled[0] != a.id {
		t.Fatalf("recycled %v, want [%s]", r.recycled, a.id)
	}
}

func TestFailedRecycleFreesSlotAndRefills(t *testing.T) {
	r := newRecycler()
	p, a := r.leaseOne(t, Config{Min: 1, Max: 2})
	defer closePool(t, p, r.fake)
	waitFor(t, p, "1 ready + 1 leased", func(s Stats) bool { return s.Ready == 1 && s.Leased == 1 })
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	r.recycleGate <- errors.New("restore failed")
	st := waitFor(t, p, "slot freed", func(s Stats) bool { return s.Warming == 0 && s.Leased == 0 })
	if st.LastError != "" {
		t.Fatalf("a failed recycle counted as a failed create: %q", st.LastError)
	}
	r.fake.mu.Lock()
	alive := r.fake.live[a.id]
	r.fake.mu.Unlock()
	if alive {
		t.Fatal("the failed recycle left the old item alive")
	}
	// Capacity is back: two leases fit in Max 2.
	for i := 0; i < 2; i++ {
		if _, err := p.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Whether recycled or made anew (ErrRecreate), an item that replaces a
// released one and that nobody needs goes: a retired pool (min 0) drains.
func TestRecycledItemNobodyNeedsIsDiscarded(t *testing.T) {
	for _, gate := range []error{nil, ErrRecreate} {
		r := newRecycler()
		p, a := r.leaseOne(t, Config{Min: 0, Max: 2})
		if err := p.Release(a.id); err != nil {
			t.Fatal(err)
		}
		r.recycleGate <- gate
		waitFor(t, p, "nothing left", func(s Stats) bool {
			return s.Warming == 0 && s.Ready == 0 && s.Discarding == 0
		})
		if n := r.liveCount(); n != 0 {
			t.Fatalf("recycle answering %v: %d items alive with min 0 and no lease", gate, n)
		}
		closePool(t, p, r.fake)
	}
}

func TestCloseDuringRecycle(t *testing.T) {
	r := newRecycler()
	p, a := r.leaseOne(t, Config{Min: 0, Max: 2})
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	// Close cancels the recycle (its ctx): the old item is destroyed and
	// nothing is left.
	closePool(t, p, r.fake)
}

func TestRecycleThatCannotMakesANewOne(t *testing.T) {
	r := newRecycler()
	p, a := r.leaseOne(t, Config{Min: 1, Max: 1})
	defer closePool(t, p, r.fake)
	creates := r.createCount()
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	r.recycleGate <- ErrRecreate
	st := waitFor(t, p, "a new one ready", func(s Stats) bool { return s.Ready == 1 && s.Warming == 0 })
	if st.LastError != "" || r.createCount() != creates+1 {
		t.Fatalf("after a recycle that could not: %+v, %d creates (want 1)", st, r.createCount()-creates)
	}
	b, err := p.Acquire(context.Background())
	if err != nil || b.id == a.id || b.id[0] != 'i' {
		t.Fatalf("acquire got %v %v, want a created item", b, err)
	}
}

// An item Recyclable rejects is destroyed in the background while its
// replacement is created, not recycled; one it accepts is recycled.
func TestUnrecyclableItemIsDiscardedNotRecycled(t *testing.T) {
	r := newRecycler()
	f := r.factory()
	f.Recyclable = func(it *item) bool { return it.id[0] == 'r' || it.id == "i2" }
	p, err := New(Config{Min: 1, Max: 1}, f)
	if err != nil {
		t.Fatal(err)
	}
	defer closePool(t, p, r.fake)
	a, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	creates := r.createCount()
	if err := p.Release(a.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p, "a replacement ready", func(s Stats) bool { return s.Ready >= 1 && s.Warming == 0 && s.Discarding == 0 })
	r.mu.Lock()
	recycled := len(r.recycled)
	r.mu.Unlock()
	r.fake.mu.Lock()
	alive := r.fake.live[a.id]
	r.fake.mu.Unlock()
	if recycled != 0 || alive || r.createCount() <= creates {
		t.Fatalf("after releasing an unrecyclable item: %d recycled, old alive %v, %d creates (want 0, false, >= 1)", recycled, alive, r.createCount()-creates)
	}
	// The replacement (i2) is accepted: its release recycles it.
	b, err := p.Acquire(context.Background())
	if err != nil || b.id != "i2" {
		t.Fatalf("acquire got %v %v, want the replacement i2", b, err)
	}
	if err := p.Release(b.id); err != nil {
		t.Fatal(err)
	}
	r.recycleGate <- nil
	waitFor(t, p, "the recycled item ready", func(s Stats) bool { return s.Ready == 1 && s.Warming == 0 })
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.recycled) != 1 || r.recycled[0] != "i2" {
		t.Fatalf("recycled %v, want [i2]", r.recycled)
	}
}

// With Ahead, a pool keeps one item per plain lease for its second item:
// made ahead, and once the leases move (AcquireAhead, Release, Promote)
// the released items are recycled into that reserve, not discarded and
// made again by creates, round after round.
func TestAheadReserveComesFromRecycling(t *testing.T) {
	r := newRecycler()
	p, err := New(Config{Min: 0, Max: 2, Ahead: 2}, r.factory())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	held := []*item{}
	for i := 0; i < 2; i++ {
		it, err := p.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, it)
	}
	waitFor(t, p, "a second item ready for each lease", func(s Stats) bool { return s.Ready == 2 && s.Warming == 0 })
	r.mu.Lock()
	createsBefore := r.creates
	r.mu.Unlock()
	for round := 0; round < 3; round++ {
		for i, old := range held {
			next, err := p.AcquireAhead(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r.recycleGate <- nil
			if err := p.Release(old.id); err != nil {
				t.Fatal(err)
			}
			if err := p.Promote(next.id); err != nil {
				t.Fatal(err)
			}
			held[i] = next
		}
		waitFor(t, p, "the released items recycled into the reserve", func(s Stats) bool { return s.Ready == 2 && s.Warming == 0 })
	}
	r.mu.Lock()
	creates, recycled := r.creates, len(r.recycled)
	r.mu.Unlock()
	if creates != createsBefore || recycled != 6 {
		t.Fatalf("3 rounds of 2 moves: %d creates (want %d), %d recycled (want 6)", creates, createsBefore, recycled)
	}
	closePool(t, p, r.fake)
}
