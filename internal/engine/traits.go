package engine

import "syscall"

// Traits is how to stop a recorded server of an engine, by name, for code
// that holds only the record (gc after a crash) and never imports the
// engine's package. The rest of what callers outside internal/engine may
// know about an engine is its entry in internal/engine/engines.
type Traits struct {
	// CleanStop shuts a server down leaving a data dir that starts
	// without recovery; FastStop ends one whose data is thrown away.
	CleanStop, FastStop syscall.Signal
}

// traits: PostgreSQL takes SIGINT (fast shutdown) or SIGQUIT (immediate);
// MySQL/MariaDB shut down cleanly on SIGTERM and are simply killed when
// their data is about to be thrown away.
var traits = map[string]Traits{
	"postgres": {CleanStop: syscall.SIGINT, FastStop: syscall.SIGQUIT},
	"mariadb":  {CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL},
	"mysql":    {CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL},
}

// TraitsOf returns an engine's traits; an unknown name gets SIGTERM and
// SIGKILL.
func TraitsOf(name string) Traits {
	if t, ok := traits[name]; ok {
		return t
	}
	return Traits{CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL}
}
