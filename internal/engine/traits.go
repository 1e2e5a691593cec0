package engine

import "syscall"

// Traits is how to stop a recorded server of an engine, by name, for code
// that holds only the record (gc after a crash) and never imports the
// engine's package. Each driver declares its own (Driver.Stop).
type Traits struct {
	// CleanStop shuts a server down leaving a data dir that starts
	// without recovery; FastStop ends one whose data is thrown away.
	CleanStop, FastStop syscall.Signal
}

// TraitsOf returns an engine's traits; an unknown name gets SIGTERM and
// SIGKILL.
func TraitsOf(name string) Traits {
	if d, ok := drivers.lookup(name); ok {
		return d.Stop
	}
	return Traits{CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL}
}
