package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestOfUIDFindsHiddenProcesses: a process of the uid that made itself
// not dumpable shows in /proc as root's, and one that is dumpable as its
// own; OfUID must list both (the cheap owner check must not skip the
// first), and KillUID must leave neither.
func TestOfUIDFindsHiddenProcesses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run processes as another uid")
	}
	const uid = 61727 // no account: nothing else runs as it
	if got := OfUID(uid); len(got) != 0 {
		t.Fatalf("uid %d already has processes: %v", uid, got)
	}
	start := func(script string) int {
		cmd := exec.Command("/usr/bin/python3", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			t.Fatalf("helper said %q", line)
		}
		return cmd.Process.Pid
	}
	const wait = "import sys,time\nprint('ready',flush=True)\ntime.sleep(120)\n"
	hidden := start("import ctypes\nctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n" + wait) // PR_SET_DUMPABLE 0
	plain := start(wait)
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/status", hidden), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 0 {
		t.Fatalf("/proc/%d/status of a process that is not dumpable belongs to uid %d; the test assumes root", hidden, st.Uid)
	}
	var pids []int
	for _, id := range OfUID(uid) {
		pids = append(pids, id.PID)
	}
	if !slices.Contains(pids, hidden) || !slices.Contains(pids, plain) {
		t.Fatalf("OfUID(%d) = %v, want both %d (not dumpable) and %d", uid, pids, hidden, plain)
	}
	if slices.Contains(pids, os.Getpid()) {
		t.Fatalf("OfUID(%d) lists this root process", uid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := KillUID(ctx, uid); err != nil {
		t.Fatal(err)
	}
	if left := OfUID(uid); len(left) != 0 {
		t.Fatalf("processes of uid %d left after KillUID: %v", uid, left)
	}
}
