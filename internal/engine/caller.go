package engine

import (
	"strings"

	"github.com/dbfork/dbfork/internal/caller"
)

// callerEnv adapts a command's environment to another user: their home
// and name, and TCP instead of the server's socket dir (private to the
// server user).
func callerEnv(env []string, c *caller.Caller) []string {
	out := env[:0:0]
	for _, kv := range tcpOnlyKV(env) {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "USER", "LOGNAME", "SUDO_UID", "SUDO_GID", "SUDO_USER", "SUDO_COMMAND", "XDG_RUNTIME_DIR":
			continue
		}
		if !c.OwnEnv && !passedToOthers(k) {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+c.Home)
	if c.Name != "" {
		out = append(out, "USER="+c.Name, "LOGNAME="+c.Name)
	}
	return out
}

// passedToOthers says which variables a daemon passes to a socket
// peer's commands: what a shell needs and what reaches the database.
func passedToOthers(k string) bool {
	switch k {
	case "PATH", "LANG", "TZ", "TERM", "DATABASE_URL":
		return true
	}
	for _, p := range append([]string{"LC_", "DBFORK_INSTANCE"}, ClientPrefixes()...) {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
