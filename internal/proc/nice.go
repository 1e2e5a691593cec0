package proc

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Background is the nice value of work made ahead of need: a pool's
// clones and restores run beside the tests its instances serve, and a
// test waiting on its own server should get the CPU first.
const Background = 10

// Niced runs fn on an OS thread of its own at nice value n and waits for
// it. Only that thread is niced (Linux keeps a nice value per thread), so
// fn must do its heavy work itself, not in goroutines it starts; a
// process it starts inherits the value. The thread is never handed back
// to the runtime: it ends with fn's goroutine, and its nice value with
// it. A nice value that cannot be set (no CAP_SYS_NICE is needed to
// raise it) only loses the priority, never the work.
func Niced(n int, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // no Unlock: the thread exits with this goroutine
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n)
		errc <- fn()
	}()
	return <-errc
}
