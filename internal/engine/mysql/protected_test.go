package mysql

import "testing"

// Every spelling the server would take for a protected option is refused;
// ordinary options pass.
func TestProtectedOptions(t *testing.T) {
	for _, k := range []string{"bind-address", "BIND_ADDRESS", "loose-bind-address", "bind", "skip-networking",
		"skip_grant_tables", "enable-skip-grant-tables", "socket", "sock", "port", "datadir", "user", "tmpdir", "extra-port", "pid-file"} {
		if err := (&Engine{}).CheckSettings(map[string]string{k: "x"}); err == nil {
			t.Errorf("%q accepted", k)
		}
	}
	for _, k := range []string{"innodb_buffer_pool_size", "max_connections", "port_open_timeout", "sql_mode", "skip_name_resolve"} {
		if err := (&Engine{}).CheckSettings(map[string]string{k: "x"}); err != nil {
			t.Errorf("%q refused: %v", k, err)
		}
	}
}
