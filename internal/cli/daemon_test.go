package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/testenv"
)

type daemonInfo struct {
	Socket  string
	Store   string
	PID     int
	Started bool
}

func (e *env) daemonStart(args ...string) daemonInfo {
	e.t.Helper()
	r := e.run(append([]string{"daemon", "start", "--json"}, args...)...)
	var info daemonInfo
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &info) != nil {
		e.t.Fatalf("daemon start: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	return info
}

// Several runners starting a daemon at once get one daemon; it serves
// leases, stays while one is held, and leaves by itself when idle with no
// instance, server or socket left behind.
func TestDaemonStartOnDemand(t *testing.T) {
	e := newEnv(t)
	if r := e.run("daemon", "status"); r.code != 3 || !strings.Contains(r.stderr, "daemon start") {
		t.Fatalf("status without a daemon: exit %d %q", r.code, r.stderr)
	}
	infos := make([]daemonInfo, 4)
	var wg sync.WaitGroup
	for i := range infos {
		wg.Add(1)
		go func() { defer wg.Done(); infos[i] = e.daemonStart("--idle", "2s") }()
	}
	wg.Wait()
	started := 0
	for _, in := range infos {
		if in.PID != infos[0].PID || in.Socket != filepath.Join(e.store, api.SocketName) {
			t.Fatalf("starters disagree on the daemon: %+v", infos)
		}
		if in.Started {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("want exactly one starter to have started the daemon, got %d: %+v", started, infos)
	}
	daemon, err := proc.Of(infos[0].PID)
	if err != nil {
		t.Fatal(err)
	}
	// The daemon leads a session of its own, whose scheduling group has
	// the daemon's urgency (root may raise it).
	if n, on, err := proc.GroupNice(daemon.PID); on && os.Geteuid() == 0 && (err != nil || n != proc.Urgent) {
		t.Errorf("daemon's autogroup nice %d (%v), want %d", n, err, proc.Urgent)
	}
	c, err := api.Dial(context.Background(), infos[0].Socket)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml")})
	if err != nil {
		t.Fatal(err)
	}
	// Held past the idle time: the daemon must stay.
	waitFor(t, func() bool { return len(e.ls().Instances) >= 2 }) // the lease plus a warm one
	if again := e.daemonStart("--idle", "2s"); again.PID != infos[0].PID || again.Started {
		t.Fatalf("a second start while one runs: %+v", again)
	}
	if err := c.Release(context.Background(), l.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return !daemon.Alive() })
	if _, err := os.Stat(infos[0].Socket); !os.IsNotExist(err) {
		t.Errorf("socket left by the idle daemon: %v", err)
	}
	e.assertNothingLeft()
}

// A daemon killed with -9 while a client waits: the client gets an error
// at once, and the next start brings a new daemon up on the stale socket.
func TestDaemonKilledWhileClientWaits(t *testing.T) {
	e := newEnv(t)
	first := e.daemonStart("--idle", "1m")
	c, err := api.Dial(context.Background(), first.Socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// Builds the golden: slow enough to be killed during.
		_, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml")})
		done <- err
	}()
	waitFor(t, func() bool { return len(testenv.ServersUnder(e.store)) > 0 })
	if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("acquire from a killed daemon succeeded")
	}
	second := e.daemonStart("--idle", "1m")
	if !second.Started || second.PID == first.PID {
		t.Fatalf("start after kill -9: %+v (first %+v)", second, first)
	}
	secondID, err := proc.Of(second.PID)
	if err != nil {
		t.Fatal(err)
	}
	e.mustRun("daemon", "stop")
	if secondID.Alive() {
		t.Error("daemon stop returned while the daemon lives")
	}
	e.mustRun("gc")
	e.assertNothingLeft()
}

// The daemon's group runs at proc.Urgent while it answers tests, and
// goes back to nice 0 while it builds a golden (minutes of loading and
// page work must not take the machine from everything else), then up
// again.
func TestDaemonYieldsWhileBuilding(t *testing.T) {
	if _, on, _ := proc.GroupNice(os.Getpid()); !on || os.Geteuid() != 0 {
		t.Skip("needs root and the kernel's autogroups")
	}
	e := newEnv(t)
	recipe := filepath.Join(e.proj, "slow.toml")
	if err := os.WriteFile(recipe, []byte("engine = \"postgres\"\n[[load]]\nrun = \"sleep 4\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info := e.daemonStart("--idle", "1m")
	defer e.run("daemon", "stop")
	if n, _, err := proc.GroupNice(info.PID); err != nil || n != proc.Urgent {
		t.Fatalf("idle daemon's autogroup nice %d (%v), want %d", n, err, proc.Urgent)
	}
	c, err := api.Dial(context.Background(), info.Socket)
	if err != nil {
		t.Fatal(err)
	}
	built := make(chan error, 1)
	go func() {
		_, err := c.EnsureGolden(context.Background(), api.GoldenRequest{Recipe: recipe})
		built <- err
	}()
	yielded := false
	for done := false; !done; {
		select {
		case err := <-built:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		case <-time.After(50 * time.Millisecond):
			if n, _, err := proc.GroupNice(info.PID); err == nil && n == 0 {
				yielded = true
			}
		}
	}
	if !yielded {
		t.Error("the daemon's group kept its urgency while it built")
	}
	if n, _, err := proc.GroupNice(info.PID); err != nil || n != proc.Urgent {
		t.Errorf("after the build: autogroup nice %d (%v), want %d", n, err, proc.Urgent)
	}
}
