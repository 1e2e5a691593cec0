package cli_test

import (
	"strings"
	"testing"
)

// A dbfork killed with SIGKILL at any phase leaves nothing `dbfork gc`
// cannot remove, no incomplete golden is ever visible, and the next
// build/up works.
func TestCrashAtEveryPhase(t *testing.T) {
	phases := []struct {
		phase string
		args  []string
		setup []string // run first, without the fault
	}{
		{"build:init", []string{"build"}, nil},
		{"build:launched", []string{"build"}, nil},
		{"build:started", []string{"build"}, nil},
		{"build:loaded", []string{"build"}, nil},
		{"build:stopped", []string{"build"}, nil},
		{"build:manifest", []string{"build"}, nil},
		{"build:published", []string{"build"}, nil},
		{"up:cloned", []string{"up"}, nil},
		{"up:started", []string{"up"}, nil},
		{"run:ready", []string{"run", "--", "true"}, nil},
		{"run:child", []string{"run", "--", "sleep", "0.1"}, nil},
		{"serve:listening", []string{"serve", "-f", "dbfork.toml"}, nil},
		{"down:stopped", []string{"down", "--all"}, []string{"up"}},
		{"down:unmounted", []string{"down", "--all"}, []string{"up"}},
	}
	e := newEnv(t)
	for _, p := range phases {
		t.Run(p.phase, func(t *testing.T) {
			e.t = t
			if strings.HasPrefix(p.phase, "build:") {
				// Start from an empty store so the build really runs.
				for _, g := range e.ls().Goldens {
					removeGolden(t, e, g.Key)
				}
			} else {
				e.mustRun("build")
			}
			if p.setup != nil {
				e.mustRun(p.setup...)
			}
			r := e.runEnv([]string{"DBFORK_CRASH_AT=" + p.phase}, p.args...)
			if r.code != -1 && r.code != 137 {
				t.Fatalf("dbfork was not killed at %s: exit %d, stderr %s", p.phase, r.code, r.stderr)
			}
			// Nothing incomplete is visible as a golden.
			ls := e.ls()
			wantGoldens := 0
			if p.phase == "build:published" || !strings.HasPrefix(p.phase, "build:") {
				wantGoldens = 1
			}
			if len(ls.Goldens) != wantGoldens {
				t.Fatalf("after a crash at %s: %d goldens visible, want %d", p.phase, len(ls.Goldens), wantGoldens)
			}
			e.mustRun("gc")
			e.assertNothingLeft()
			// And the next run works.
			r = e.run("run", "--", "psql", "-XAtc", "select count(*) from items")
			if r.code != 0 || strings.TrimSpace(r.stdout) != "3001" {
				t.Fatalf("run after crash+gc: exit %d %q %q", r.code, r.stdout, r.stderr)
			}
			e.assertNothingLeft()
		})
	}
}
