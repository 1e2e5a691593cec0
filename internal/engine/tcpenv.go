package engine

import "strings"

// TCPOnly rewrites a client environment for a user who cannot enter the
// server's socket dir (private to the server user): clients go over
// 127.0.0.1 with the instance password instead. Each driver names the
// variables that point its clients at a socket (Driver.Client).
func TCPOnly(env map[string]string) {
	for _, d := range Drivers() {
		for _, k := range d.Client.HostVars {
			if h, ok := env[k]; ok && strings.HasPrefix(h, "/") {
				env[k] = "127.0.0.1"
			}
		}
		for _, k := range d.Client.SocketVars {
			delete(env, k)
		}
	}
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
