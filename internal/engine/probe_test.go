package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// probeDir is a dir the probe's user (nobody, when the tests run as
// root) can enter and write in.
func probeDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dbfork-probe-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// runs counts how often the probe really ran (one line per run).
func runs(t *testing.T, counter string) int {
	t.Helper()
	b, err := os.ReadFile(counter)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestProbeRemembersBinariesByIdentity(t *testing.T) {
	d := probeDir(t)
	SetProbeCache(filepath.Join(d, "cache", "probes.json"))
	t.Cleanup(func() { SetProbeCache(""); forgetProbes() })
	forgetProbes()
	// An ELF binary of its own (a copy of sh), so its identity is this
	// test's; the probe counts its runs in a file.
	sh := filepath.Join(d, "sh")
	data, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sh, data, 0o755); err != nil {
		t.Fatal(err)
	}
	counter := filepath.Join(d, "runs")
	args := []string{"-c", "echo run >> " + counter + "; echo version 1"}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		out, err := Probe(ctx, sh, args...)
		if err != nil || string(out) != "version 1\n" {
			t.Fatalf("probe %d: %q, %v", i, out, err)
		}
	}
	if n := runs(t, counter); n != 1 {
		t.Fatalf("the binary ran %d times for 3 probes, want 1", n)
	}
	// Across runs: another process starts with only the file.
	fi, err := os.Stat(filepath.Join(d, "cache", "probes.json"))
	if err != nil {
		t.Fatalf("no probe cache written: %v", err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("probe cache mode %v, want 0600", fi.Mode().Perm())
	}
	forgetProbes()
	if _, err := Probe(ctx, sh, args...); err != nil {
		t.Fatal(err)
	}
	if n := runs(t, counter); n != 1 {
		t.Fatalf("the binary ran again although the cache on disk knew it (%d runs)", n)
	}
	// Another binary at the same path is asked again.
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(sh, later, later); err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(ctx, sh, args...); err != nil {
		t.Fatal(err)
	}
	if n := runs(t, counter); n != 2 {
		t.Fatalf("a changed binary was not asked again (%d runs, want 2)", n)
	}
	// A cache file others could have written is not believed.
	if err := os.Chmod(filepath.Join(d, "cache", "probes.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	forgetProbes()
	if _, err := Probe(ctx, sh, args...); err != nil {
		t.Fatal(err)
	}
	if n := runs(t, counter); n != 3 {
		t.Fatalf("a probe cache writable by others was believed (%d runs, want 3)", n)
	}
}

func TestProbeKeepsScriptsOnlyInProcess(t *testing.T) {
	d := probeDir(t)
	SetProbeCache(filepath.Join(d, "probes.json"))
	t.Cleanup(func() { SetProbeCache(""); forgetProbes() })
	forgetProbes()
	counter := filepath.Join(d, "runs")
	script := filepath.Join(d, "pg_config")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho run >> "+counter+"\necho /usr/lib/postgresql/99/bin\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if out, err := Probe(ctx, script, "--bindir"); err != nil || string(out) != "/usr/lib/postgresql/99/bin\n" {
			t.Fatalf("probe %d: %q, %v", i, out, err)
		}
	}
	if n := runs(t, counter); n != 1 {
		t.Fatalf("the script ran %d times for 2 probes in one process, want 1", n)
	}
	forgetProbes() // a new process
	if _, err := Probe(ctx, script, "--bindir"); err != nil {
		t.Fatal(err)
	}
	if n := runs(t, counter); n != 2 {
		t.Fatalf("a script's answer outlived its process (%d runs, want 2): what it says depends on what else is installed", n)
	}
	// A failing probe is not remembered.
	bad := filepath.Join(d, "bad")
	if err := os.WriteFile(bad, []byte("#!/bin/sh\necho run >> "+counter+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := Probe(ctx, bad, "-V"); err == nil {
			t.Fatal("a failing probe succeeded")
		}
	}
	if n := runs(t, counter); n != 4 {
		t.Fatalf("a failed probe was remembered (%d runs, want 4)", n)
	}
}
