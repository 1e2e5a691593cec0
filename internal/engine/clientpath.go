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

// ClientCommand resolves name the way a shell with WithClientPath's PATH
// would: the matching client in the connection's client dir first.
// (exec.Command looks names up in the caller's PATH, not the child's.)
func ClientCommand(name string, connEnv map[string]string) string {
	dir := connEnv[ClientBinEnv]
	if dir == "" || strings.ContainsRune(name, os.PathSeparator) {
		return name
	}
	p := dir + string(os.PathSeparator) + name
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return p
	}
	return name
}
