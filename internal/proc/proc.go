// Package proc identifies processes by PID plus start time, so that a PID
// recorded by a crashed dbfork is never confused with an unrelated process
// that later reused the number. dbfork never looks processes up by name.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Identity is what dbfork records about a process it started.
type Identity struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"start_time"` // clock ticks since boot, /proc/PID/stat field 22
}

// Of reads the identity of a running process.
func Of(pid int) (Identity, error) {
	st, err := startTime(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{PID: pid, StartTime: st}, nil
}

func startTime(pid int) (uint64, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	// fields[0] is field 3 (state); start time is field 22.
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, os.ErrNotExist // a zombie has already exited
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// statFields is /proc/PID/stat from its third field (state) on.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(b)
	// The command name is in parentheses and may hold spaces or ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return nil, fmt.Errorf("parse /proc/%d/stat: too few fields", pid)
	}
	return fields, nil
}

// Parent is the pid of pid's parent process, or -1 when it cannot be read.
func Parent(pid int) int {
	fields, err := statFields(pid)
	if err != nil {
		return -1
	}
	ppid, err := strconv.Atoi(fields[1]) // field 4
	if err != nil {
		return -1
	}
	return ppid
}

// Alive reports whether the recorded process still runs (same PID, same
// start time). A zero identity is never alive.
func (id Identity) Alive() bool {
	if id.PID <= 0 {
		return false
	}
	st, err := startTime(id.PID)
	return err == nil && st == id.StartTime
}

// Signal sends sig only if the process is still the one recorded. It
// holds a pidfd while it checks the start time and signals through it, so
// a PID reused between the check and the signal is never hit.
func (id Identity) Signal(sig syscall.Signal) error {
	if id.PID <= 0 {
		return os.ErrProcessDone
	}
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	defer unix.Close(fd)
	if !id.Alive() {
		return os.ErrProcessDone
	}
	err = unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// Wait returns once the process is gone or ctx ends. It works for
// processes that are not our children (a server started by an earlier
// dbfork): a pidfd becomes readable the moment its process exits; where
// pidfds are missing it polls.
func (id Identity) Wait(ctx context.Context) error {
	if fd, err := unix.PidfdOpen(id.PID, 0); err == nil {
		defer unix.Close(fd)
		if !id.Alive() {
			return nil // gone, or the PID is another process's now
		}
		for ctx.Err() == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 20) // ms; then look at ctx again
			if err != nil && !errors.Is(err, unix.EINTR) {
				break // fall back to polling
			}
			if n > 0 {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	delay := time.Millisecond
	for id.Alive() {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
	return nil
}

// Stop sends sig, waits up to grace, then SIGKILLs the recorded process and
// waits for it to go. It returns nil when the process is gone.
func (id Identity) Stop(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	if err := id.Signal(sig); errors.Is(err, os.ErrProcessDone) {
		return nil
	} else if err != nil {
		return fmt.Errorf("signal pid %d: %w", id.PID, err)
	}
	wctx, cancel := context.WithTimeout(ctx, grace)
	err := id.Wait(wctx)
	cancel()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := id.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill pid %d: %w", id.PID, err)
	}
	wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return id.Wait(wctx)
}

// UID is the real uid pid runs as (from /proc/PID/status), or -1 when it
// cannot be read.
func UID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				if n, err := strconv.Atoi(f[0]); err == nil {
					return n
				}
			}
		}
	}
	return -1
}

// WorkingIn lists the processes whose working directory is dir: how a
// server is found that was started but not yet recorded when its starter
// died (PostgreSQL and MariaDB chdir into their data dir). Nothing is
// matched by name.
func WorkingIn(dir string) []Identity {
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Identity
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || filepath.Clean(cwd) != want {
			continue
		}
		if id, err := Of(pid); err == nil {
			out = append(out, id)
		}
	}
	return out
}
