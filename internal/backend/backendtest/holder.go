package backendtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
)

// holder is a process started the way a server on a namespaced clone is
// (through the backend's Wrap), so the clone is mounted while it lives.
type holder struct {
	cmd  *exec.Cmd
	root string // /proc/PID/root
	done chan struct{}
}

func startHolder(t *testing.T, wrap func([]string, *syscall.SysProcAttr) []string) *holder {
	t.Helper()
	attr := &syscall.SysProcAttr{Setsid: true}
	argv := wrap([]string{"/bin/sleep", "3600"}, attr)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.SysProcAttr, cmd.Stdout, cmd.Stderr = attr, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process in the clone's namespace: %v", err)
	}
	h := &holder{cmd: cmd, root: fmt.Sprintf("/proc/%d/root", cmd.Process.Pid), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.stop(t) })
	// Wait until the helper has exec'd sleep (the mount is made by then).
	deadline := time.Now().Add(10 * time.Second)
	for {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid))
		if exe == "/usr/bin/sleep" || exe == "/bin/sleep" {
			return h
		}
		select {
		case <-h.done:
			t.Fatalf("the clone's namespace helper exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the clone's namespace helper did not start sleep: %s", out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *holder) stop(t *testing.T) {
	if h == nil {
		return
	}
	_ = h.cmd.Process.Kill()
	<-h.done
}

// removeWhileHeld checks, as a user who cannot bind-mount, that removing
// a namespaced clone whose namespace still lives leaves the golden whole
// and every path gone; others only check that removal works.
func removeWhileHeld(t *testing.T, b backend.Backend, h *holder, clone, scratch, golden string, before map[string]entry) {
	ctx := context.Background()
	if h != nil {
		if _, err := os.Stat(filepath.Join(h.root+clone, "PG_VERSION")); err != nil {
			t.Fatalf("clone not visible through its namespace: %v", err)
		}
	}
	if err := b.Remove(ctx, clone, scratch); err != nil {
		t.Fatalf("remove: %v", err)
	}
	h.stop(t)
	for _, p := range []string{clone, scratch} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s still exists after remove", p)
		}
	}
	if got := snapshotTree(t, golden); !equalTrees(t, before, got) {
		t.Fatal("golden changed by a remove")
	}
}
