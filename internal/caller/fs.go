package caller

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AsFS runs fn with the filesystem rights of the user ctx acts for
// (their fsuid, fsgid and groups, on an OS thread of its own), or as
// this process when there is no such user. A daemon serving a peer, or
// `sudo dbfork build` on a user's recipe, reads the recipe, expands its
// globs and opens its inputs this way: what the user cannot see, dbfork
// does not see for them (no file content, and no "exists but cannot be
// read" either). Files opened in fn stay usable after it returns: a
// descriptor keeps the rights it was opened with.
//
// The thread is never given back to the runtime: LockOSThread without
// UnlockOSThread ends it with the goroutine, and the runtime clones no
// new thread from a locked one, so the changed identity goes nowhere
// else. When ctx ends first, AsFS returns ctx's error without
// waiting for fn.
func AsFS(ctx context.Context, fn func() error) error {
	c := From(ctx)
	if c == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := becomeOnThisThread(c); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// becomeOnThisThread sets the calling thread's groups, fsgid and fsuid to
// c's. The raw system calls change this thread only (the libc and Go
// wrappers would change every thread of the process). A change of fsuid
// from 0 also drops the capabilities that bypass file permissions.
func becomeOnThisThread(c *Caller) error {
	groups := c.Groups
	var p unsafe.Pointer
	if len(groups) > 0 {
		p = unsafe.Pointer(&groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(p), 0); e != 0 {
		return fmt.Errorf("take the groups of uid %d: %w", c.UID, e)
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.GID), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.UID), 0, 0)
	// Both calls answer with the previous id and never fail: ask again
	// (an invalid id changes nothing) to know they took.
	gid, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	uid, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if int(uid) != c.UID || int(gid) != c.GID {
		return fmt.Errorf("could not take the file rights of uid %d", c.UID)
	}
	return nil
}
