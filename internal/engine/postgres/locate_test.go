package postgres

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Debian's pg_config wrapper is not run to find servers (its answer is
// one of /usr/lib/postgresql/*/bin, each a candidate already); any other
// pg_config on PATH is asked, and its answer comes first.
func TestCandidatesSkipDebianPgConfig(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		debian       bool
	}{
		{"debian", "#!/bin/sh\nPGBINROOT=\"/usr/lib/postgresql/\"\ntouch MARK\necho /from/debian\n", true},
		{"other", "#!/bin/sh\ntouch MARK\necho /from/other\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The probe runs as an unprivileged uid when we are root
			// (engine.ProbeCommand): it must reach the script and the mark.
			dir := t.TempDir()
			marks := filepath.Join(dir, "marks")
			for _, d := range []string{filepath.Dir(dir), dir} {
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(marks, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(marks, 0o1777); err != nil {
				t.Fatal(err)
			}
			mark := filepath.Join(marks, "ran")
			script := strings.ReplaceAll(tc.script, "MARK", mark)
			if err := os.WriteFile(filepath.Join(dir, "pg_config"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir+":/usr/bin:/bin")
			skip := tc.debian && len(debianBindirs()) > 0
			if got := debianPgConfig(); got != skip {
				t.Fatalf("debianPgConfig = %v, want %v", got, skip)
			}
			dirs := candidates(context.Background())
			_, err := os.Stat(mark)
			if ran := err == nil; ran == skip {
				t.Fatalf("pg_config ran: %v; want it run: %v (candidates %v)", ran, !skip, dirs)
			}
			if skip {
				for _, d := range debianBindirs() {
					if !slices.Contains(dirs, d) {
						t.Fatalf("candidates %v lack %s", dirs, d)
					}
				}
			} else if dirs[0] != "/from/"+tc.name {
				t.Fatalf("pg_config's answer is not the first candidate: %v", dirs)
			}
		})
	}
}
