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
//
// A lock file may be removed by whoever holds its lock (gc removes those
// of gone instances). A process that opened the file just before and
// locks it just after would hold a lock on a file no longer in the
// directory, while the next one creates a new file and locks that: two
// holders. So the lock only counts when, once taken, path still names
// the file that was locked; otherwise it is taken again on the new file.
func TryLock(path string) (*Lock, error) {
	for {
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
		same, err := stillNamed(f, path)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if same {
			return &Lock{f: f}, nil
		}
		f.Close() // removed (or replaced) by its holder while we waited: again
	}
}

// stillNamed reports whether path is the file f has open.
func stillNamed(f *os.File, path string) (bool, error) {
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return false, err
	}
	if err := unix.Stat(path, &named); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return held.Dev == named.Dev && held.Ino == named.Ino, nil
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

// Remove removes the lock file while the lock is still held, then drops
// the lock: a process that locks the file after that sees it removed and
// locks a new one (TryLock). Removing it after Release could remove a
// file another process has just locked. Safe on nil.
func (l *Lock) Remove() {
	if l == nil || l.f == nil {
		return
	}
	_ = os.Remove(l.f.Name())
	l.Release()
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
