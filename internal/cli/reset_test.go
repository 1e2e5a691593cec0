package cli_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
)

func psql(t *testing.T, dsn, sql string) string {
	t.Helper()
	out, err := exec.Command("psql", "-XAtc", sql, dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v: %s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

// `dbfork reset ID` takes an `up` instance back to its golden: same DSN,
// the seed rows only. Bad ids get one line.
func TestResetUpInstance(t *testing.T) {
	e := newEnv(t)
	var up struct{ ID, DSN string }
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil {
		t.Fatal(err)
	}
	psql(t, up.DSN, "delete from items; create table scratch(a int)")
	r := e.mustRun("reset", up.ID)
	if !strings.HasPrefix(r.stdout, "reset "+up.ID+" in ") || !strings.Contains(r.stdout, up.DSN) {
		t.Errorf("reset output %q", r.stdout)
	}
	if got := psql(t, up.DSN, "select count(*) from items"); got != "3001" {
		t.Errorf("items after reset: %s", got)
	}
	if got := psql(t, up.DSN, "select count(*) from pg_tables where tablename = 'scratch'"); got != "0" {
		t.Errorf("a table made before the reset survived it")
	}
	var v struct {
		ID, DSN string
		ResetMs float64 `json:"reset_ms"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("reset", "--json", up.ID[:5]).stdout), &v); err != nil || v.DSN != up.DSN || v.ID != up.ID || v.ResetMs <= 0 {
		t.Errorf("reset --json by prefix: %+v %v", v, err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"reset"}, 2, "one instance id"},
		{[]string{"reset", "a", "b"}, 2, "one instance id"},
		{[]string{"reset", "../x"}, 2, "8 hex digits"},
		{[]string{"reset", "0badf00d"}, 3, "not found"},
		{[]string{"reset", "-f", "missing.toml", up.ID}, 3, "missing.toml"},
	} {
		r := e.run(c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%v: exit %d %q, want %d with %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	e.mustRun("down", up.ID)
	e.assertNothingLeft()
}

// kill -9 in the middle of a reset, of `dbfork reset` or of the daemon
// resetting a lease: gc leaves nothing, the next run works.
func TestResetCrash(t *testing.T) {
	// reset:restored is a restore's (plain-dir clones: reflink on XFS)
	// between restoring the files and starting the server.
	for _, c := range []struct{ phase, backend string }{{"reset:stopped", "auto"}, {"reset:restored", "reflink"}, {"reset:cloned", "auto"}} {
		phase := c.phase
		t.Run(phase, func(t *testing.T) {
			e := newEnv(t)
			if c.backend == "reflink" {
				e.useLoopStore("xfs", 1<<30)
			}
			var up struct{ ID string }
			if err := json.Unmarshal([]byte(e.mustRun("up", "--json", "--backend", c.backend).stdout), &up); err != nil {
				t.Fatal(err)
			}
			if r := e.runEnv([]string{"DBFORK_CRASH_AT=" + phase}, "reset", up.ID); r.code != -1 {
				t.Errorf("reset with a crash at %s: exit %d %q", phase, r.code, r.stderr)
			}
			e.mustRun("gc")
			e.assertNothingLeft()

			srv := e.cmd("serve")
			srv.Env = append(srv.Env, "DBFORK_CRASH_AT="+phase)
			if err := srv.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
			var cl *api.Client
			waitFor(t, func() bool {
				var err error
				cl, err = api.Dial(context.Background(), filepath.Join(e.store, api.SocketName))
				return err == nil
			})
			l, err := cl.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml"), Backend: c.backend})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Reset(context.Background(), l.ID); err == nil {
				t.Fatalf("reset answered although the daemon was to die at %s", phase)
			}
			if err := srv.Wait(); err == nil {
				t.Fatalf("daemon exited cleanly, want a crash at %s", phase)
			}
			e.mustRun("gc")
			e.assertNothingLeft()
			if r := e.run("run", "--", "psql", "-XAtc", "select count(*) from items"); r.code != 0 || strings.TrimSpace(r.stdout) != "3001" {
				t.Fatalf("run after the crash: %d %q %q", r.code, r.stdout, r.stderr)
			}
			e.assertNothingLeft()
		})
	}
}
