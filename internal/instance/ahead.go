package instance

import (
	"context"
	"os"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/golden"
)

// aheadWork is what a Reset left to run after it (in the background in
// the daemon): the old clone's removal and, with PrepareAhead, the clone
// for the next reset, made beside the running server so that reset costs
// only stop, rename and start (issue 17: reset in place within ~100 ms).
type aheadWork struct {
	prepared chan struct{} // closed once the next clone is made (or not)
	done     chan struct{} // closed once the old clone is gone too
	cancel   context.CancelFunc
	ready    bool // next holds a complete clone; read after prepared
}

// afterReset is the work a Reset hands to later once the server is back.
// The old clone is first renamed out of the next reset's way (to
// trashSuffix), then the next clone is made, then the old one removed: a
// reset that comes quickly waits for the clone only. Clones that copy the
// golden's data in full (the copy backend) are not made ahead: that would
// double every instance's disk.
func (in *Instance) afterReset(b backend.Backend, g *golden.Golden) func() {
	st := in.State
	aside, asideScratch := st.DataDir+asideSuffix, st.Scratch+asideSuffix
	trash, trashScratch := st.DataDir+trashSuffix, st.Scratch+trashSuffix
	next, nextScratch := st.DataDir+nextSuffix, st.Scratch+nextSuffix
	ahead := in.PrepareAhead && !b.Caps().FullCopy
	ctx, cancel := context.WithCancel(context.Background())
	a := &aheadWork{prepared: make(chan struct{}), done: make(chan struct{}), cancel: cancel}
	prev := in.removing
	in.ahead, in.removing = a, a.done
	return func() {
		defer close(a.done)
		if prev != nil {
			<-prev // the previous reset's trash is gone
		}
		// If the old clone cannot be moved out of the way, the next
		// reset removes it itself (swapIn), not this goroutine beside it.
		moved := os.Rename(aside, trash) == nil
		if moved {
			_ = os.Rename(asideScratch, trashScratch) // namespaced clones keep their content there
		}
		if ahead {
			a.ready = prepareNext(ctx, b, g, next, nextScratch, st.UID)
		}
		close(a.prepared)
		if moved {
			_ = removeClone(context.Background(), b, trash, trashScratch)
		}
	}
}

func prepareNext(ctx context.Context, b backend.Backend, g *golden.Golden, next, scratch string, uid int) bool {
	if err := removeClone(ctx, b, next, scratch); err != nil {
		return false
	}
	if err := b.Prepare(ctx, g.DataDir(), next, scratch); err != nil {
		_ = removeClone(context.Background(), b, next, scratch)
		return false
	}
	if err := handOver(next, uid); err != nil {
		_ = removeClone(context.Background(), b, next, scratch)
		return false
	}
	return ctx.Err() == nil
}

// takeAhead waits until the last reset's after-work made (or gave up on)
// the next clone and says whether one is ready for this reset.
func (in *Instance) takeAhead(ctx context.Context) (bool, error) {
	a := in.ahead
	if a == nil {
		return false, nil
	}
	select {
	case <-a.prepared:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	in.ahead = nil
	return a.ready, nil
}

// stopAhead cancels the last reset's after-work and waits for all of it,
// before the instance is torn down.
func (in *Instance) stopAhead() {
	if a := in.ahead; a != nil {
		a.cancel()
		in.ahead = nil
	}
	if in.removing != nil {
		<-in.removing
		in.removing = nil
	}
}
