package proc

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

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

// Urgent is the nice value of the few processes a waiting test's call
// goes through (the daemon, a server's admin connection): their work is
// short, and at 8 busy tests on 2 cores a call otherwise waits tens of
// milliseconds for its turn on a core at every hop.
const Urgent = -10

// Prioritize gives process pid nice value n, both as a task and as its
// scheduling group: with the kernel's autogroups on (the default on
// desktop and server kernels alike), every session is a group sharing the
// CPU equally with the others, whatever its tasks' nice values, and a
// PostgreSQL backend is a session of its own, so only the group's nice
// value (/proc/PID/autogroup) gives it its turn sooner. Lowering either
// takes CAP_SYS_NICE: without it (a rootless daemon) the error says so
// and the process keeps its priority; callers ignore it. pid must be a
// single-threaded process that leads its session (the group is the
// session's: every process in it would change).
func Prioritize(pid, n int) error {
	err := unix.Setpriority(unix.PRIO_PROCESS, pid, n)
	if werr := setGroupNice(pid, n); werr != nil && err == nil {
		err = werr
	}
	return err
}

// Expedite puts process pid in the lowest real-time class (SCHED_FIFO,
// priority 1): it runs as soon as it wakes, ahead of every ordinary task,
// however many are runnable. It is for a process that runs a few
// milliseconds of work at a time on a waiting caller's behalf and then
// sleeps again: a server's admin backend, whose statements (close the
// last test's database) each fresh call waits for. A nice value only
// shortens that wait: at 8 busy tests on 2 cores the backend still waited
// 14–16 ms on average, up to 56, for a core before starting a statement
// that takes 0.1–2 ms (docs/performance.md, session 20). The kernel's
// real-time throttling (sched_rt_runtime_us, 95 % of each second by
// default) bounds what a runaway process could take; the class is not
// inherited by the process's children. Needs CAP_SYS_NICE (or an
// RLIMIT_RTPRIO): without it the error says so and nothing changes;
// callers ignore it.
func Expedite(pid int) error {
	attr := unix.SchedAttr{
		Size:     unix.SizeofSchedAttr,
		Policy:   unix.SCHED_FIFO,
		Flags:    unix.SCHED_FLAG_RESET_ON_FORK,
		Priority: 1,
	}
	return unix.SchedSetAttr(pid, &attr, 0)
}

// PrioritizeSelf gives this process's autogroup nice value n when the
// process leads its session (`dbfork daemon start` starts serve in a
// session of its own; a serve run in a terminal shares the terminal's
// group, which is left alone). Thread nice values are left as they are:
// processes started from a thread inherit its value, and the servers the
// daemon starts must compete as equals with their tests (they start
// sessions, so groups, of their own, at nice 0). Without autogroups (off,
// or the process is in a CPU cgroup of its own) nothing changes.
func PrioritizeSelf(n int) error {
	sid, err := unix.Getsid(0)
	if err != nil || sid != os.Getpid() {
		return err
	}
	return setGroupNice(os.Getpid(), n)
}

// setGroupNice sets the autogroup nice value of pid's session, when the
// kernel schedules by autogroups.
func setGroupNice(pid, n int) error {
	if !autogroups() {
		return nil
	}
	return os.WriteFile(fmt.Sprintf("/proc/%d/autogroup", pid), []byte(strconv.Itoa(n)), 0)
}

func autogroups() bool {
	on, err := Sysctl("kernel.sched_autogroup_enabled")
	return err == nil && on == "1"
}

// GroupNice is the autogroup nice value of process pid, and whether the
// kernel schedules by autogroups at all.
func GroupNice(pid int) (int, bool, error) {
	if !autogroups() {
		return 0, false, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", pid))
	if err != nil {
		return 0, true, err
	}
	// "/autogroup-123 nice 0"
	f := strings.Fields(string(b))
	if len(f) != 3 || f[1] != "nice" {
		return 0, true, fmt.Errorf("unexpected /proc/%d/autogroup: %q", pid, b)
	}
	n, err := strconv.Atoi(f[2])
	return n, true, err
}
