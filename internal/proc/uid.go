package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// OfUID lists the live (not zombie) processes that run with uid as their
// real, effective or saved uid: everything a server of a uid of its own,
// and whatever its SQL started, can be.
func OfUID(uid int) []Identity {
	pfd, err := unix.Open("/proc", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(pfd)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Identity
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || !mayHaveUID(pfd, e.Name(), uid) || !hasUID(pid, uid) {
			continue
		}
		if id, err := Of(pid); err == nil {
			out = append(out, id)
		}
	}
	return out
}

// mayHaveUID rules out, cheaply, a process that cannot run with uid, so
// that /proc/PID/status (which the kernel writes out field by field: a
// scan of this machine's ~580 processes, nearly all kernel threads, took
// 15 ms, and a pool's every recycle made three) is read only for the
// others. Its files belong to the process's effective uid while it is
// dumpable, else to root. A process owned by another uid, not root, is
// dumpable and runs as that uid: one of uid cannot get there without a
// privilege it lacks, since taking another user's uid by a set-id
// program or gaining capabilities makes a process not dumpable (unless
// fs.suid_dumpable is 1: then every process is read). One owned by root
// is a candidate unless it is a kernel thread, whose exe link does not
// resolve (a process cannot drop its own).
func mayHaveUID(pfd int, pid string, uid int) bool {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, pid+"/status", &st, 0); err != nil {
		return false // gone
	}
	switch int(st.Uid) {
	case uid:
		return true
	case 0:
		var buf [1]byte
		_, err := unix.Readlinkat(pfd, pid+"/exe", buf[:])
		return !errors.Is(err, unix.ENOENT)
	}
	return suidDumpable()
}

// suidDumpable says whether fs.suid_dumpable is 1 (set-id programs stay
// dumpable, so their files show the effective uid, not root).
var suidDumpable = sync.OnceValue(func() bool {
	v, err := Sysctl("fs.suid_dumpable")
	return err != nil || v == "1"
})

// hasUID reports whether pid is alive and runs with uid among its real,
// effective and saved uids.
func hasUID(pid, uid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "State:"); ok {
			if s := strings.TrimSpace(rest); strings.HasPrefix(s, "Z") || strings.HasPrefix(s, "X") {
				return false
			}
		}
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			for _, v := range f[:min(3, len(f))] {
				if n, err := strconv.Atoi(v); err == nil && n == uid {
					return true
				}
			}
			return false
		}
	}
	return false
}

// KillUID kills every process of uid (see OfUID) and waits until none is
// left, so that a uid can be handed to someone else. Each process is hit
// through a pidfd after its uid was checked again, so a PID reused
// meanwhile is never hit; rounds repeat until no process is left, since a
// process may fork while the others die. Never call it for a uid that is
// not dbfork's own (it would kill a user's session).
func KillUID(ctx context.Context, uid int) error {
	if uid <= 0 {
		return fmt.Errorf("refusing to kill every process of uid %d", uid)
	}
	delay := time.Millisecond
	for round := 0; ; round++ {
		ids := OfUID(uid)
		if len(ids) == 0 {
			return nil
		}
		for _, id := range ids {
			if err := killIfUID(id, uid); err != nil {
				return err
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("processes of uid %d still running (%d): %w", uid, len(ids), ctx.Err())
		case <-t.C:
		}
		if delay < 50*time.Millisecond {
			delay *= 2
		}
	}
}

func killIfUID(id Identity, uid int) error {
	fd, err := unix.PidfdOpen(id.PID, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil
		}
		return fmt.Errorf("pidfd_open %d: %w", id.PID, err)
	}
	defer unix.Close(fd)
	if !id.Alive() || !hasUID(id.PID, uid) {
		return nil
	}
	err = unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill pid %d of uid %d: %w", id.PID, uid, err)
	}
	return nil
}
