package instance

import (
	"context"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/golden"
)

// aheadWork is what a Reset left running in the background: removing the
// old clone and, with PrepareAhead, making the clone for the next reset
// beside the running server, so that reset costs only stop, rename and
// start (issue 17: reset in place within ~100 ms).
type aheadWork struct {
	done   chan struct{} // closed when the work ended
	cancel context.CancelFunc
	ready  bool // next holds a complete clone; read after done
}

// afterReset is the work a Reset hands to later once the server is back.
// Clones that copy the golden's data in full (the copy backend) are not
// made ahead: that would double every instance's disk.
func (in *Instance) afterReset(b backend.Backend, g *golden.Golden) func() {
	st := in.State
	aside, asideScratch := st.DataDir+asideSuffix, st.Scratch+asideSuffix
	next, nextScratch := st.DataDir+nextSuffix, st.Scratch+nextSuffix
	if !in.PrepareAhead || !backend.SharesData(b.Name()) {
		return func() { _ = removeClone(context.Background(), b, aside, asideScratch) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &aheadWork{done: make(chan struct{}), cancel: cancel}
	in.ahead = a
	return func() {
		defer close(a.done)
		_ = removeClone(context.Background(), b, aside, asideScratch)
		if err := removeClone(ctx, b, next, nextScratch); err != nil {
			return
		}
		if err := b.Prepare(ctx, g.DataDir(), next, nextScratch); err != nil {
			_ = removeClone(context.Background(), b, next, nextScratch)
			return
		}
		a.ready = ctx.Err() == nil
	}
}

// takeAhead waits for the background work of the last reset and says
// whether it left a clone ready for this one.
func (in *Instance) takeAhead(ctx context.Context) (bool, error) {
	a := in.ahead
	if a == nil {
		return false, nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	in.ahead = nil
	return a.ready, nil
}

// stopAhead cancels background work of the last reset and waits for it,
// before the instance is torn down.
func (in *Instance) stopAhead() {
	if a := in.ahead; a != nil {
		a.cancel()
		<-a.done
		in.ahead = nil
	}
}
