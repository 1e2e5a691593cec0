package dbforktest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The daemon-finding rule: DBFORK_SOCKET wins without running anything;
// otherwise the binary's `daemon start --json` decides, and its one-line
// error is the test's error; without a binary nothing is found.
func TestDaemonSocketRule(t *testing.T) {
	dir := t.TempDir()
	stub := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	t.Setenv("DBFORK_STORE", "")
	t.Setenv("PATH", dir)

	t.Setenv("DBFORK_SOCKET", "/run/x.sock")
	t.Setenv("DBFORK_BIN", stub("never", "echo ran >"+filepath.Join(dir, "ran")+"; exit 1"))
	if s, found, err := daemonSocket(ctx); err != nil || !found || s != "/run/x.sock" {
		t.Errorf("with DBFORK_SOCKET: %q %v %v", s, found, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the binary ran although DBFORK_SOCKET was set")
	}

	t.Setenv("DBFORK_SOCKET", "")
	t.Setenv("DBFORK_BIN", stub("ok", `echo '{"socket":"/s/dbfork.sock","store":"/s","pid":7,"started":true}'`))
	if s, found, err := daemonSocket(ctx); err != nil || !found || s != "/s/dbfork.sock" {
		t.Errorf("from daemon start: %q %v %v", s, found, err)
	}

	t.Setenv("DBFORK_BIN", stub("fails", "echo 'dbfork: starting a daemon for /var/lib/dbfork needs root: run `sudo dbfork daemon start`' >&2; exit 4"))
	_, _, err := daemonSocket(ctx)
	if err == nil || !strings.Contains(err.Error(), "needs root: run `sudo dbfork daemon start`") || strings.Contains(err.Error(), "\n") {
		t.Errorf("failing daemon start: %v", err)
	}

	t.Setenv("DBFORK_BIN", stub("garbage", "echo hello"))
	if _, _, err := daemonSocket(ctx); err == nil || !strings.Contains(err.Error(), "not the daemon's socket") {
		t.Errorf("garbage output: %v", err)
	}

	t.Setenv("DBFORK_BIN", "")
	if _, found, err := daemonSocket(ctx); err != nil || found {
		t.Errorf("no binary: %v %v", found, err)
	}
}
