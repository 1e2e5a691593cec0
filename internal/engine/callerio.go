package engine

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AsCallerFS runs fn with the filesystem rights of the user ctx acts for
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
// else. When ctx ends first, AsCallerFS returns ctx's error without
// waiting for fn.
func AsCallerFS(ctx context.Context, fn func() error) error {
	c := callerFrom(ctx)
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

// OpenInput opens a recipe input or a recipe for reading, refusing what
// is not a regular file: a FIFO or a device named (or swapped in) as an
// input would otherwise hang or feed a build forever. O_NONBLOCK keeps
// the open itself from waiting for a FIFO's writer.
func OpenInput(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file (%s): name a file", path, kindOf(fi.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a plain file"
}

// CallerUID is the uid of the user ctx acts for, or this process's.
func CallerUID(ctx context.Context) int {
	if c := callerFrom(ctx); c != nil {
		return c.UID
	}
	return os.Geteuid()
}
