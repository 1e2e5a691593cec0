package oci

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// writeback makes the disk work while a pull is still decompressing.
// Each time another `every` bytes have been written, a background
// goroutine starts writeback of the files finished since the last time
// (sync_file_range) and fdatasyncs the file being written: that writes
// its data and, through the flush it sends down, what the store's loop
// device has cached too. The final syncFS, which still makes the pull
// durable before it is published, then finds little left. Only the
// pull's own files are touched: running clones on the same store keep
// their dirty pages. A failed flush fails the pull.
type writeback struct {
	every   int64
	pending atomic.Int64
	kick    chan int // a dup'ed descriptor of the file being written
	done    chan struct{}
	err     error // read after done

	mu       sync.Mutex
	finished []int // dup'ed descriptors of files written since the last flush
}

func startWriteback(every int64) *writeback {
	w := &writeback{every: every, kick: make(chan int, 1), done: make(chan struct{})}
	go w.run()
	return w
}

// wrote counts n more bytes written to f.
func (w *writeback) wrote(f *os.File, n int64) {
	if w.pending.Add(n) < w.every {
		return
	}
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return // the final syncFS covers it
	}
	select {
	case w.kick <- fd:
		w.pending.Store(0)
	default: // a flush is under way; try again after the next write
		unix.Close(fd)
	}
}

// maxFinished bounds the descriptors held for files waiting for their
// writeback to start (a golden may have tens of thousands of small files);
// files past it are left to the final syncFS.
const maxFinished = 256

// finish says f is complete, before it is closed.
func (w *writeback) finish(f *os.File) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.finished) >= maxFinished {
		return
	}
	if fd, err := unix.Dup(int(f.Fd())); err == nil {
		w.finished = append(w.finished, fd)
	}
}

func (w *writeback) run() {
	defer close(w.done)
	for fd := range w.kick {
		w.mu.Lock()
		finished := w.finished
		w.finished = nil
		w.mu.Unlock()
		for _, f := range finished {
			w.fail(unix.SyncFileRange(f, 0, 0, unix.SYNC_FILE_RANGE_WRITE))
			unix.Close(f)
		}
		w.fail(unix.Fdatasync(fd))
		unix.Close(fd)
	}
	for _, f := range w.finished {
		unix.Close(f)
	}
}

func (w *writeback) fail(err error) {
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("flush pulled files: %w", err)
	}
}

// close waits for a flush under way and says whether any failed. No
// wrote or finish may come after it.
func (w *writeback) close() error {
	close(w.kick)
	<-w.done
	return w.err
}
