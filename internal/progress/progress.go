// Package progress shows what a long command is doing: a spinner per step
// on a terminal, nothing at all otherwise (logs and CI stay clean).
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// Reporter shows steps. The zero value and nil are silent.
type Reporter struct {
	w       io.Writer
	mu      sync.Mutex
	name    string
	started time.Time
	stop    chan struct{}
	done    chan struct{}
}

// New returns a reporter drawing on w when w is a terminal, else a silent
// one.
func New(w io.Writer) *Reporter {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &Reporter{w: w}
}

var frames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// Step starts a new step, finishing the previous one as done.
func (r *Reporter) Step(name string) {
	if r == nil {
		return
	}
	r.finish("✓")
	r.mu.Lock()
	r.name, r.started = name, time.Now()
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	stop, done := r.stop, r.done
	r.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			r.mu.Lock()
			fmt.Fprintf(r.w, "\r\033[K%s %s %.1fs", frames[i%len(frames)], r.name, time.Since(r.started).Seconds())
			r.mu.Unlock()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Done finishes the current step; failed marks it with a cross.
func (r *Reporter) Done(failed bool) {
	if r == nil {
		return
	}
	if failed {
		r.finish("✗")
	} else {
		r.finish("✓")
	}
}

func (r *Reporter) finish(mark string) {
	r.mu.Lock()
	stop, done, name := r.stop, r.done, r.name
	r.stop = nil
	r.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	r.mu.Lock()
	fmt.Fprintf(r.w, "\r\033[K%s %s %.1fs\n", mark, name, time.Since(r.started).Seconds())
	r.mu.Unlock()
}
