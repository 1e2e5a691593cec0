package engine

import "strings"

// TCPOnly rewrites a client environment for a user who cannot enter the
// server's socket dir (private to the server user): clients go over
// 127.0.0.1 with the instance password instead. This is the one place
// that knows which variables point clients at a socket.
func TCPOnly(env map[string]string) {
	if h, ok := env["PGHOST"]; ok && strings.HasPrefix(h, "/") {
		env["PGHOST"] = "127.0.0.1"
	}
	delete(env, "MYSQL_UNIX_PORT")
}

// tcpOnlyKV is TCPOnly for an os/exec environment list.
func tcpOnlyKV(env []string) []string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	TCPOnly(m)
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := m[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}
