package postgres

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// probeDir is a dir of scripts standing in for PostgreSQL binaries, each
// recording the uid it ran as into rec; mode is the dir's.
func probeDir(t *testing.T, rec string, mode os.FileMode, names ...string) string {
	d, err := os.MkdirTemp("", "dbfork-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	for _, n := range names {
		out := "postgres (PostgreSQL) 16.4"
		if n == "psql" {
			out = "psql (PostgreSQL) 16.4"
		}
		script := "#!/bin/sh\nid -u >> " + rec + "/" + n + "\necho '" + out + "'\n"
		if err := os.WriteFile(filepath.Join(d, n), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

// As root, version probes of located or fetched binaries run as nobody,
// and client tools from a dir others can change are never run at all.
func TestVersionProbesUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("what root's probes run as: tests run as root (CI does)")
	}
	rec, err := os.MkdirTemp("", "dbfork-probe-rec-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(rec)
	if err := os.Chmod(rec, 0o777); err != nil {
		t.Fatal(err)
	}
	server := probeDir(t, rec, 0o755, "postgres", "initdb")
	clients := probeDir(t, rec, 0o755, "psql", "pg_restore")
	open := probeDir(t, rec, 0o777, "psql", "pg_restore")
	p, err := NewAt(context.Background(), server, []string{open, clients})
	if err != nil {
		t.Fatal(err)
	}
	if p.ClientBindir != clients {
		t.Fatalf("client tools from %s, want %s", p.ClientBindir, clients)
	}
	for _, n := range []string{"postgres", "psql"} {
		b, err := os.ReadFile(filepath.Join(rec, n))
		if err != nil {
			t.Fatalf("%s was not probed: %v", n, err)
		}
		for _, l := range strings.Fields(string(b)) {
			if uid, _ := strconv.Atoi(l); uid == 0 {
				t.Errorf("%s -V ran as root", n)
			}
		}
		if n == "psql" && strings.Count(string(b), "\n") != 1 {
			t.Errorf("psql --version ran %d times (once from a dir others can change?)", strings.Count(string(b), "\n"))
		}
	}
}
