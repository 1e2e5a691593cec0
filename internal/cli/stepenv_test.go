package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A run step runs in the environment of whoever asked, not in the
// daemon's: the daemon below was started from a shell without the
// project's tools (as one started by another project's test run is), and
// with a secret of its own.
func TestRunStepsGetTheCallersEnvironment(t *testing.T) {
	e := newEnv(t)
	tools := filepath.Join(e.root, "venv", "bin")
	if err := os.MkdirAll(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	// The project's migration tool, found only on the caller's PATH.
	tool := "#!/bin/sh\npsql -v ON_ERROR_STOP=1 -qc \"create table stepenv as select '$DJANGO_SETTINGS_MODULE'::text as settings, '$VIRTUAL_ENV'::text as venv, '${DBFORK_TEST_DAEMON_SECRET:-none}'::text as secret\"\n"
	if err := os.WriteFile(filepath.Join(tools, "migrate-tool"), []byte(tool), 0o755); err != nil {
		t.Fatal(err)
	}
	recipe := `engine = "postgres"
database = "shop"
owner = "shop"
env = ["DJANGO_SETTINGS_MODULE"]

[[load]]
sql = ["schema.sql"]

[[load]]
run = "migrate-tool"
`
	if err := os.WriteFile(filepath.Join(e.proj, "dbfork.toml"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := e.cmd("serve")
	srv.Env = append(srv.Env, "PATH=/usr/local/bin:/usr/bin:/bin", "DBFORK_TEST_DAEMON_SECRET=hunter2", "VIRTUAL_ENV=", "DJANGO_SETTINGS_MODULE=")
	out := &syncBuf{}
	srv.Stderr = out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "listening on") })

	caller := []string{"PATH=" + tools + ":" + os.Getenv("PATH"), "VIRTUAL_ENV=" + filepath.Dir(tools), "DJANGO_SETTINGS_MODULE=shop.settings"}
	// Without the caller's PATH the tool is not found, and the error says
	// whose environment the step ran in.
	r := e.runEnv([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, "up", "--json")
	if r.code == 0 || !strings.Contains(r.stderr, "migrate-tool") || !strings.Contains(r.stderr, "the environment of the client that asked") {
		t.Fatalf("a step whose tool is not on the caller's PATH: exit %d, %q", r.code, r.stderr)
	}
	r = e.runEnv(caller, "run", "--", "psql", "-XAtc", "select settings || ',' || venv || ',' || secret from stepenv")
	if r.code != 0 {
		t.Fatalf("run through the daemon with the caller's environment: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := "shop.settings," + filepath.Dir(tools) + ",none"
	if got := strings.TrimSpace(r.stdout); got != want {
		t.Fatalf("the step saw %q, want %q (the caller's settings and venv, not the daemon's secret)", got, want)
	}
	if _, err := exec.LookPath("migrate-tool"); err == nil {
		t.Fatal("test set-up: migrate-tool must not be on the test's own PATH")
	}
}
