package proc

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNicedOnlyItsThread: fn runs at the nice value asked for, and the
// caller's thread keeps its own.
func TestNicedOnlyItsThread(t *testing.T) {
	// getpriority returns 20 - nice (the raw syscall's convention).
	before, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	var inside int
	if err := Niced(Background, func() error {
		p, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
		inside = 20 - p
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside != Background {
		t.Fatalf("nice inside fn = %d, want %d", inside, Background)
	}
	after, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil || after != before {
		t.Fatalf("caller's priority %d -> %d (%v)", before, after, err)
	}
}

// Prioritize sets a process's nice value and, with autogroups on, the
// nice value of the group its session is: the one a PostgreSQL backend
// leads. PrioritizeSelf leaves a group alone that this process does not
// lead (a terminal's, here the test runner's).
func TestPrioritize(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lowering a nice value needs root (CAP_SYS_NICE)")
	}
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if err := Prioritize(pid, Urgent); err != nil {
		t.Fatal(err)
	}
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, pid); err != nil || 20-p != Urgent {
		t.Fatalf("nice %d (%v), want %d", 20-p, err, Urgent)
	}
	n, on, err := GroupNice(pid)
	if on && (err != nil || n != Urgent) {
		t.Fatalf("autogroup nice %d (%v), want %d", n, err, Urgent)
	}
	if Parent(pid) != os.Getpid() {
		t.Fatalf("Parent(%d) = %d, want %d", pid, Parent(pid), os.Getpid())
	}
	if sid, _ := unix.Getsid(0); sid != os.Getpid() {
		before, _, _ := GroupNice(os.Getpid())
		if err := PrioritizeSelf(Urgent); err != nil {
			t.Fatal(err)
		}
		if after, _, _ := GroupNice(os.Getpid()); after != before {
			t.Fatalf("PrioritizeSelf changed a group this process does not lead: %d -> %d", before, after)
		}
	}
}

// Expedite puts a process in the lowest real-time class, and its
// children do not inherit it.
func TestExpedite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a real-time class needs root (CAP_SYS_NICE)")
	}
	// The shell forks only once told to, after Expedite, and says the
	// child's pid.
	cmd := exec.Command("sh", "-c", "read go; sleep 30 & echo $!; wait")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	if err := Expedite(pid); err != nil {
		t.Fatal(err)
	}
	attr, err := unix.SchedGetAttr(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if attr.Policy != unix.SCHED_FIFO || attr.Priority != 1 || attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK == 0 {
		t.Fatalf("policy %d priority %d flags %#x, want SCHED_FIFO 1 with reset on fork", attr.Policy, attr.Priority, attr.Flags)
	}
	if _, err := in.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var kid int
	if _, err := fmt.Fscan(out, &kid); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Kill(kid, unix.SIGKILL) }()
	ka, err := unix.SchedGetAttr(kid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ka.Policy != 0 /* SCHED_OTHER */ {
		t.Fatalf("child %d has policy %d, want SCHED_OTHER (not inherited)", kid, ka.Policy)
	}
}
