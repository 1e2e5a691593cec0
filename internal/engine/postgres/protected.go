package postgres

import (
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
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

var _ engine.ArtifactChecker = (*Postgres)(nil)

// runsCode are the settings that make a server run a command or load a
// library of a config's choosing, or read config from elsewhere. A golden
// made on another machine (pulled, imported) may not carry them: its
// config is data, and the first clone would run them.
var runsCode = map[string]bool{
	"restore_command": true, "archive_command": true, "archive_cleanup_command": true,
	"recovery_end_command": true, "ssl_passphrase_command": true, "archive_library": true,
	"dynamic_library_path": true, "jit_provider": true,
	"include": true, "include_if_exists": true, "include_dir": true,
}

// startsInRecovery are files whose presence makes the server replay WAL
// through restore_command (or from a primary) at start.
var startsInRecovery = []string{"recovery.signal", "standby.signal", "recovery.conf"}

// CheckArtifact refuses a data dir from elsewhere whose server config
// (postgresql.conf, postgresql.auto.conf) runs commands, loads libraries
// or includes other files, or that would start in recovery.
func (p *Postgres) CheckArtifact(files []string, read func(rel string) ([]byte, error)) error {
	for _, f := range files {
		for _, sig := range startsInRecovery {
			if f == sig {
				return errs.Invalid("the golden holds %s, which would start every clone in recovery (running restore_command): a golden from elsewhere is refused with it", f)
			}
		}
		if f != "postgresql.conf" && f != "postgresql.auto.conf" {
			continue
		}
		data, err := read(f)
		if err != nil {
			return err
		}
		if name := confRunsCode(string(data)); name != "" {
			return errs.Invalid("the golden's %s sets %s: a golden from elsewhere may not run commands, load libraries or include config, so it is refused (build it here instead)", f, name)
		}
	}
	return nil
}

// confRunsCode returns the first setting of a postgresql.conf that is in
// runsCode (names are case-insensitive; a line is `name = value`,
// `name value` or an include directive; # starts a comment).
func confRunsCode(conf string) string {
	for _, line := range strings.Split(conf, "\n") {
		line = strings.TrimLeft(line, " \t\r\f\v")
		// A name is what PostgreSQL's lexer takes for one: anything may
		// follow it ('=', a quote, a value).
		end := strings.IndexFunc(line, func(r rune) bool {
			return !(r == '_' || r == '$' || r == '.' || r >= 0x80 || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
		})
		if end >= 0 {
			line = line[:end]
		}
		name := strings.ToLower(line)
		if runsCode[name] || strings.HasSuffix(name, "_preload_libraries") {
			return name
		}
	}
	return ""
}
