package oci

import (
	"sync/atomic"
)

// writeback flushes the filesystem in the background while a pull is
// still writing, each time another `every` bytes have been written, so
// the disk works while the layers decompress and the final syncFS (which
// still makes the pull durable before it is published) finds little left
// to write. A failed flush fails the pull.
type writeback struct {
	dir     string
	every   int64
	pending atomic.Int64
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	err     error // read after done
}

func startWriteback(dir string, every int64) *writeback {
	w := &writeback{dir: dir, every: every, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// wrote counts n more bytes written.
func (w *writeback) wrote(n int64) {
	if w.pending.Add(n) >= w.every {
		select {
		case w.kick <- struct{}{}:
		default: // a flush is due already
		}
	}
}

func (w *writeback) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
			w.pending.Store(0)
			if err := syncFS(w.dir); err != nil && w.err == nil {
				w.err = err
			}
		}
	}
}

// close waits for a flush under way and says whether any failed.
func (w *writeback) close() error {
	close(w.stop)
	<-w.done
	return w.err
}
