package engine

import (
	"path/filepath"
	"strings"
	"syscall"
)

// Traits is what code outside internal/engine may know about an engine,
// by name, without importing its implementation: how to stop a recorded
// server, how much memory a test-profile instance takes, how its data
// files map to tables. One entry per engine; callers never switch on the
// engine's name themselves.
type Traits struct {
	// CleanStop shuts a server down leaving a data dir that starts
	// without recovery; FastStop ends one whose data is thrown away.
	CleanStop, FastStop syscall.Signal
	// MemoryPerInstance is a test-profile server's memory plus a test's
	// margin, for sizing pools.
	MemoryPerInstance uint64
	// TableOfFile names the table a data-dir file (relative path) holds,
	// from the path alone; nil when only the server's catalog knows
	// (PostgreSQL's files are numbered).
	TableOfFile func(rel string) string
}

// traits of every engine, measured on this project's VM: PostgreSQL with
// small shared_buffers; MariaDB/MySQL with the test profile's buffer pool
// (MariaDB's grows with the machine up to 512 MiB, allocated as pages are
// read, so a short test stays near the base figure).
var traits = map[string]Traits{
	"postgres": {CleanStop: syscall.SIGINT, FastStop: syscall.SIGQUIT, MemoryPerInstance: 48 << 20},
	"mariadb":  {CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL, MemoryPerInstance: 192 << 20, TableOfFile: innodbTable},
	"mysql":    {CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL, MemoryPerInstance: 192 << 20, TableOfFile: innodbTable},
}

// TraitsOf returns an engine's traits; an unknown name gets the careful
// defaults (SIGTERM, SIGKILL, the larger memory figure).
func TraitsOf(name string) Traits {
	if t, ok := traits[name]; ok {
		return t
	}
	return Traits{CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL, MemoryPerInstance: 192 << 20}
}

// innodbTable names DB/TABLE.ibd "DB.TABLE".
func innodbTable(rel string) string {
	dir, file := filepath.Split(rel)
	if dir == "" || !strings.HasSuffix(file, ".ibd") {
		return ""
	}
	return strings.TrimSuffix(dir, "/") + "." + strings.TrimSuffix(file, ".ibd")
}
