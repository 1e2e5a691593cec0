package postgres

import (
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
)

// protected are the settings dbfork owns on a PostgreSQL instance.
var protected = map[string]bool{
	"listen_addresses": true, "port": true,
	"unix_socket_directories": true, "unix_socket_group": true, "unix_socket_permissions": true,
	"hba_file": true, "ident_file": true, "config_file": true, "data_directory": true,
	"external_pid_file": true,
}

// CheckSettings refuses recipe settings dbfork sets itself. PostgreSQL
// setting names are case-insensitive.
func (p *Postgres) CheckSettings(settings map[string]string) error {
	return engine.RefuseProtected(settings, func(k string) string { return strings.ToLower(strings.TrimSpace(k)) }, protected)
}
