package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verify names what changed in a golden; a changed golden is never cloned
// until it is removed and rebuilt.
func TestVerify(t *testing.T) {
	e := newEnv(t)
	key := strings.TrimSpace(e.mustRun("build").stdout)
	if r := e.mustRun("verify"); !strings.Contains(r.stdout, key[:12]+"  ok") {
		t.Fatalf("verify of a fresh golden: %q", r.stdout)
	}
	data := filepath.Join(e.store, "goldens", key, "data")
	// Change one byte of PG_VERSION without changing its size: only the
	// full check sees it.
	p := filepath.Join(data, "PG_VERSION")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("verify", "--quick"); r.code != 0 {
		t.Errorf("quick verify saw a same-size change: %d %s", r.code, r.stdout)
	}
	r := e.run("verify", key[:8])
	if r.code != 5 || !strings.Contains(r.stdout, "PG_VERSION: content changed") || !strings.Contains(r.stderr, "failed verification") {
		t.Fatalf("verify after a content change: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// A file added after the build: the quick check before each clone refuses.
	if err := os.WriteFile(filepath.Join(data, "intruder"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = e.run("up")
	if r.code != 5 || !strings.Contains(r.stderr, "intruder: not in the manifest") || !strings.Contains(r.stderr, "will not be cloned") {
		t.Fatalf("up on a changed golden: %d %q", r.code, r.stderr)
	}
	if r := e.run("verify", "--remove"); r.code != 2 {
		t.Errorf("--remove without keys: %d", r.code)
	}
	r = e.mustRun("verify", "--remove", key)
	if !strings.Contains(r.stdout, "removed") {
		t.Errorf("verify --remove: %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(e.store, "goldens", key)); !os.IsNotExist(err) {
		t.Fatalf("golden still there: %v", err)
	}
	if again := strings.TrimSpace(e.mustRun("build").stdout); again != key {
		t.Fatalf("rebuild gave %s, want %s", again, key)
	}
	e.mustRun("verify")
	// A set-id bit added to a golden file is a change (issue 12 L7).
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, fi.Mode().Perm()|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if r := e.run("verify", "--quick"); r.code != 5 || !strings.Contains(r.stdout, "PG_VERSION: mode u") {
		t.Fatalf("verify after a setuid bit: %d %q", r.code, r.stdout)
	}
	if err := os.Chmod(p, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	e.mustRun("verify")
	// A golden an instance uses is not removed.
	e.mustRun("up")
	if err := os.WriteFile(filepath.Join(data, "intruder"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run("verify", "--remove", key); r.code != 5 || !strings.Contains(r.stderr, "is used by instance") {
		t.Errorf("remove of a golden in use: %d %q", r.code, r.stderr)
	}
	e.mustRun("down", "--all")
	e.assertNothingLeft()
}

// Issue 12 M5: a crash while `verify --remove` removes a golden never
// wedges its key: the golden leaves sight in one rename, gc reaps the
// rest, and the next build publishes again. A key left without its
// manifest (what a crash in the old order left) is set aside by build and
// by gc.
func TestRemoveGoldenCrash(t *testing.T) {
	e := newEnv(t)
	key := strings.TrimSpace(e.mustRun("build").stdout)
	// Only a golden that fails verification is removed: damage it.
	if err := os.WriteFile(filepath.Join(e.store, "goldens", key, "data", "intruder"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.runEnv([]string{"DBFORK_CRASH_AT=verify:unpublished"}, "verify", "--remove", key)
	if r.code != -1 && r.code != 137 {
		t.Fatalf("not killed: exit %d %q", r.code, r.stderr)
	}
	if len(e.ls().Goldens) != 0 {
		t.Fatal("a golden half-removed is still visible")
	}
	e.mustRun("gc")
	e.assertNothingLeft()
	if again := strings.TrimSpace(e.mustRun("build").stdout); again != key {
		t.Fatalf("rebuild after the crash gave %q", again)
	}

	// The old order's leftover: the final dir without its manifest.
	if err := os.Remove(filepath.Join(e.store, "goldens", key, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	if again := strings.TrimSpace(e.mustRun("build").stdout); again != key {
		t.Fatalf("build over a manifest-less golden dir gave %q", again)
	}
	if err := os.Remove(filepath.Join(e.store, "goldens", key, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	e.mustRun("gc")
	if _, err := os.Stat(filepath.Join(e.store, "goldens", key)); !os.IsNotExist(err) {
		t.Fatalf("gc left the manifest-less golden dir: %v", err)
	}
	e.assertNothingLeft()
	e.mustRun("run", "--", "true")
}
