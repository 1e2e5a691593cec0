package engine

import (
	"os"
	"strings"
)

// ClientBinEnv names, in a connection's environment, the directory whose
// command-line clients (psql, mariadb, ...) match the server. Anything
// that runs a command against an instance (run steps, `dbfork run`) puts
// it first on PATH, so a bare `psql` talks to a fetched server with
// suitable tools.
const ClientBinEnv = "DBFORK_CLIENT_BIN"

// WithClientPath returns base plus connEnv, with PATH led by the client
// dir connEnv names (when it names one).
func WithClientPath(base []string, connEnv map[string]string) []string {
	env := append([]string{}, base...)
	for k, v := range connEnv {
		env = append(env, k+"="+v)
	}
	dir := connEnv[ClientBinEnv]
	if dir == "" {
		return env
	}
	path := ""
	for _, kv := range base {
		if strings.HasPrefix(kv, "PATH=") {
			path = strings.TrimPrefix(kv, "PATH=")
		}
	}
	if path == "" {
		path = os.Getenv("PATH")
	}
	return append(env, "PATH="+dir+string(os.PathListSeparator)+path)
}
