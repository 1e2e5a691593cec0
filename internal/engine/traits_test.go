package engine

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestTraits(t *testing.T) {
	// The engines' own traits are checked with their drivers
	// (engines.TestDrivers).
	unknown := TraitsOf("nosuch")
	if unknown.CleanStop != syscall.SIGTERM || unknown.FastStop != syscall.SIGKILL {
		t.Errorf("unknown engine: %+v", unknown)
	}
}

func TestClientPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "psql"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	conn := map[string]string{ClientBinEnv: dir, "PGPORT": "5"}
	env := WithClientPath([]string{"PATH=/usr/bin:/bin", "HOME=/h"}, conn)
	last := env[len(env)-1]
	if last != "PATH="+dir+":/usr/bin:/bin" || !strings.Contains(strings.Join(env, " "), "PGPORT=5") {
		t.Fatalf("env: %v", env)
	}
	if got := ClientCommand("psql", conn); got != filepath.Join(dir, "psql") {
		t.Errorf("psql resolves to %q", got)
	}
	if got := ClientCommand("pg_dump", conn); got != "pg_dump" {
		t.Errorf("a client the dir lacks resolves to %q", got)
	}
	if env := WithClientPath([]string{"PATH=/bin"}, map[string]string{"X": "1"}); env[0] != "PATH=/bin" || len(env) != 2 {
		t.Errorf("no client dir: %v", env)
	}
}
