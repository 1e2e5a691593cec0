package lockfile

import (
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Holders that remove the lock file as they go (as gc does with the locks
// of gone instances) never leave two holders at once: a process that
// opened the file before it was removed and locked it after must not count
// as holding the lock. Each open file is its own flock, so goroutines
// contend like processes.
func TestRemovedLockFileIsNotHeldTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	var holders, taken, most atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				l, err := TryLock(path)
				if errors.Is(err, ErrHeld) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				taken.Add(1)
				holders.Add(-1)
				if i%2 == 0 {
					l.Remove()
				} else {
					l.Release()
				}
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 || taken.Load() == 0 {
		t.Fatalf("at most %d holders at once over %d locks taken; want exactly 1", most.Load(), taken.Load())
	}
}

func TestHeldAndReleased(t *testing.T) {
	path := filepath.Join(t.TempDir(), "y.lock")
	l, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second TryLock: %v, want ErrHeld", err)
	}
	if !Held(path) {
		t.Fatal("Held says free while locked")
	}
	l.Remove()
	if Held(path) {
		t.Fatal("Held says locked after Remove")
	}
}
