package proc

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestIdentityOfSelf(t *testing.T) {
	id, err := Of(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !id.Alive() {
		t.Fatal("own process reported dead")
	}
	stale := id
	stale.StartTime++
	if stale.Alive() {
		t.Fatal("identity with a different start time reported alive")
	}
	if err := stale.Signal(syscall.SIGTERM); err != os.ErrProcessDone {
		t.Fatalf("signal to a stale identity: got %v, want ErrProcessDone", err)
	}
}

func TestStopEscalatesToKill(t *testing.T) {
	// A shell that ignores SIGTERM must still be stopped after the grace.
	cmd := exec.Command("sh", "-c", "trap '' TERM; while :; do sleep 0.05; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait() // reap, so the process does not linger as a zombie
	id, err := Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Stop(context.Background(), syscall.SIGTERM, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if id.Alive() {
		t.Fatal("process still alive after Stop")
	}
}

func TestMemInfo(t *testing.T) {
	total, avail := MemInfo("MemTotal"), MemInfo("MemAvailable")
	if total < 64<<20 || avail == 0 || avail > total {
		t.Fatalf("MemTotal %d, MemAvailable %d", total, avail)
	}
	if n := MemInfo("NoSuchField"); n != 0 {
		t.Fatalf("an unknown field reads %d, want 0", n)
	}
}
