package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/testenv"
)

// Four processes building four different keys at once all succeed.
func TestConcurrentBuildsOfDifferentKeys(t *testing.T) {
	e := newEnv(t)
	var wg sync.WaitGroup
	outs := make([]result, 4)
	for i := range outs {
		p := testenv.WriteRecipe(t, filepath.Join(e.root, fmt.Sprintf("r%d", i)), "engine = \"postgres\"\n[[load]]\nsql = [\"s.sql\"]\n",
			map[string]string{"s.sql": fmt.Sprintf("create table t(x int); insert into t values (%d);\n", i)})
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = e.run("build", "-f", p) }()
	}
	wg.Wait()
	keys := map[string]bool{}
	for _, o := range outs {
		if o.code != 0 {
			t.Fatalf("build: %d %q", o.code, o.stderr)
		}
		keys[strings.TrimSpace(o.stdout)] = true
	}
	if len(keys) != 4 || len(e.ls().Goldens) != 4 {
		t.Fatalf("keys %v, goldens %d", keys, len(e.ls().Goldens))
	}
	e.assertNothingLeft()
}

// run, up/down, gc, down --all and a serve with leases, all at once for a
// bounded time: no command ever loses an instance it holds (every run's
// query succeeds), and nothing is left at the end.
func TestCommandsRunningTogether(t *testing.T) {
	e := newEnv(t)
	e.mustRun("build")
	srv, _, _ := e.startServe("-f", "dbfork.toml")
	deadline := time.Now().Add(15 * time.Second)
	var wg sync.WaitGroup
	var runs, ups atomic.Int64
	errc := make(chan string, 100)
	loop := func(f func() string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if msg := f(); msg != "" {
					errc <- msg
					return
				}
			}
		}()
	}
	query := []string{"psql", "-XAtc", "insert into items(name) values ('x'); select count(*) from items"}
	for i := 0; i < 2; i++ { // through serve
		loop(func() string {
			r := e.run(append([]string{"run", "--"}, query...)...)
			if r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "3002") {
				return fmt.Sprintf("run: %d %q %q", r.code, r.stdout, r.stderr)
			}
			runs.Add(1)
			return ""
		})
	}
	loop(func() string { // without serve
		r := e.run(append([]string{"run", "--no-daemon", "--"}, query...)...)
		if r.code != 0 || !strings.HasSuffix(strings.TrimSpace(r.stdout), "3002") {
			return fmt.Sprintf("run --no-daemon: %d %q %q", r.code, r.stdout, r.stderr)
		}
		runs.Add(1)
		return ""
	})
	loop(func() string { // up then down; a concurrent `down --all` may take it first
		r := e.run("up", "--no-daemon", "--json")
		if r.code != 0 {
			return fmt.Sprintf("up: %d %q", r.code, r.stderr)
		}
		ups.Add(1)
		id := r.stdout[strings.Index(r.stdout, `"id": "`)+7:][:8]
		if r := e.run("down", id); r.code != 0 && r.code != 3 {
			return fmt.Sprintf("down %s: %d %q", id, r.code, r.stderr)
		}
		return ""
	})
	loop(func() string {
		if r := e.run("gc"); r.code != 0 {
			return fmt.Sprintf("gc: %d %q", r.code, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
		return ""
	})
	loop(func() string {
		// A `run` in progress holds its instance: down --all leaves it and
		// says so with exit 5.
		if r := e.run("down", "--all"); r.code != 0 && !(r.code == 5 && strings.Contains(r.stderr, "left running")) {
			return fmt.Sprintf("down --all: %d %q", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond)
		return ""
	})
	wg.Wait()
	close(errc)
	for msg := range errc {
		t.Error(msg)
	}
	if runs.Load() < 3 || ups.Load() < 1 {
		t.Errorf("too little happened: %d runs, %d ups", runs.Load(), ups.Load())
	}
	_ = srv.Process.Signal(syscall.SIGTERM)
	_ = srv.Wait()
	e.mustRun("gc", "--all")
	e.assertNothingLeft()
}
