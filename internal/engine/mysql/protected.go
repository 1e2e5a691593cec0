package mysql

import (
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
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
