package mysql

import (
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// protected are the options dbfork owns on a MariaDB/MySQL instance, in
// canonical spelling (lower case, '_' for '-', without skip_/enable_/…).
var protected = map[string]bool{
	"bind_address": true, "port": true, "extra_port": true, "socket": true, "networking": true,
	"grant_tables": true, "datadir": true, "pid_file": true, "user": true, "tmpdir": true,
}

// canonical spells an option the way the server matches it: '-' and '_'
// are the same, and loose_, maximum_, skip_, enable_ and disable_ only
// modify the option that follows. The server also accepts any unambiguous
// prefix of a name, so a key that is the prefix of a protected name comes
// back "" (refused).
func canonical(k string) string {
	k = strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "-", "_")
	for changed := true; changed; {
		changed = false
		for _, p := range []string{"loose_", "maximum_", "skip_", "enable_", "disable_"} {
			if strings.HasPrefix(k, p) {
				k, changed = strings.TrimPrefix(k, p), true
			}
		}
	}
	for name := range protected {
		if strings.HasPrefix(name, k) {
			return ""
		}
	}
	return k
}

// CheckSettings refuses recipe settings dbfork sets itself.
func (e *Engine) CheckSettings(settings map[string]string) error {
	return engine.RefuseProtected(settings, canonical, protected)
}

var _ engine.ArtifactChecker = (*Engine)(nil)

// runsCode are the options that make a server run SQL or load a library
// of a config file's choosing at start.
var runsCode = []string{"plugin_load", "plugin_load_add", "plugin_dir", "init_file", "init_connect", "init_slave", "init_replica"}

// CheckArtifact refuses a data dir from elsewhere (a pulled or imported
// golden) that holds an option file setting any of runsCode, or one that
// includes others (!include, !includedir). Servers start with
// --no-defaults, so such a file is never read on purpose; refusing it
// keeps a later change of that from turning data into code. MySQL's
// persisted variables (mysqld-auto.cnf) are JSON; their names are
// looked for as quoted keys.
func (e *Engine) CheckArtifact(files []string, read func(rel string) ([]byte, error)) error {
	for _, f := range files {
		if !strings.HasSuffix(f, ".cnf") && !strings.HasSuffix(f, ".ini") {
			continue
		}
		data, err := read(f)
		if err != nil {
			return err
		}
		if name := optionRunsCode(string(data)); name != "" {
			return errs.Invalid("the golden's option file %s sets %s: a golden from elsewhere may not run SQL, load plugins or include files at start, so it is refused (build it here instead)", f, name)
		}
	}
	return nil
}

func optionRunsCode(text string) string {
	flat := strings.ReplaceAll(strings.ToLower(text), "-", "_")
	for _, line := range strings.Split(flat, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "!include") {
			return "!include"
		}
		name, _, _ := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		for _, p := range []string{"loose_", "maximum_", "enable_"} {
			name = strings.TrimPrefix(name, p)
		}
		for _, n := range runsCode {
			if name == n || strings.Contains(line, `"`+n+`"`) {
				return n
			}
		}
	}
	return ""
}
