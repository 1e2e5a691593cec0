// Package lockfile wraps flock(2). A lock dies with its holder, so a
// crashed dbfork never leaves a lock behind, and a lock that can be taken
// proves that nobody is using what it guards.
package lockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Lock is a held flock on a file.
type Lock struct{ f *os.File }

// ErrHeld is returned by TryLock when another process holds the lock.
var ErrHeld = errors.New("lock held by another process")

func open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	return f, nil
}

// TryLock takes an exclusive lock without waiting.
func TryLock(path string) (*Lock, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Acquire waits for an exclusive lock until ctx ends; onWait is called once
// if the lock is busy (to tell the user why nothing happens).
func Acquire(ctx context.Context, path string, onWait func()) (*Lock, error) {
	delay := 5 * time.Millisecond
	waited := false
	for {
		l, err := TryLock(path)
		if !errors.Is(err, ErrHeld) {
			return l, err
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
		if delay < 200*time.Millisecond {
			delay *= 2
		}
	}
}

// Held reports whether some process holds the lock at path right now.
func Held(path string) bool {
	l, err := TryLock(path)
	if err != nil {
		return errors.Is(err, ErrHeld)
	}
	l.Release()
	return false
}

// Release drops the lock. Safe on nil.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	_ = unix.Flock(int(l.f.Fd()), unix.LOCK_UN)
	l.f.Close()
	l.f = nil
}
