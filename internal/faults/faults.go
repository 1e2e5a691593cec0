// Package faults lets tests stop dbfork dead at a named phase, to prove
// that a crash at any point leaves nothing that gc cannot clean up.
package faults

import (
	"os"
	"strings"
	"syscall"
)

// EnvVar names the phases (comma separated) at which dbfork kills itself
// with SIGKILL, e.g. DBFORK_CRASH_AT=build:loaded.
const EnvVar = "DBFORK_CRASH_AT"

// At kills the process if phase is listed in $DBFORK_CRASH_AT.
func At(phase string) {
	v := os.Getenv(EnvVar)
	if v == "" {
		return
	}
	for _, p := range strings.Split(v, ",") {
		if p == phase {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns
		}
	}
}
