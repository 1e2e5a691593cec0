package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Bad input: a one-line message on stderr that says what is wrong, a
// non-zero exit, and no golden or build dir left behind.
func TestBadInputGetsOneLineErrors(t *testing.T) {
	e := newEnv(t)
	write := func(name, body string) string {
		p := filepath.Join(e.proj, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("bad.sql", "create table t(a int);\nselect nosuchcolumn from t;\n")
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"syntax error", []string{"build", "-f", write("syntax.toml", "engine = \"postgres\"\n[[load]\n")}, 2, "syntax.toml:2: syntax error"},
		{"unknown key", []string{"build", "-f", write("unknown.toml", "engine = \"postgres\"\nseed = \"x\"\n")}, 2, `unknown key "seed"`},
		{"missing file", []string{"build", "-f", write("missing.toml", "engine = \"postgres\"\n[[load]]\nsql = \"nope.sql\"\n")}, 2, "nope.sql not found"},
		{"missing recipe", []string{"build", "-f", "nowhere.toml"}, 3, "recipe nowhere.toml not found"},
		{"failing sql", []string{"build", "-f", write("badsql.toml", "engine = \"postgres\"\n[[load]]\nsql = \"bad.sql\"\n")}, 1, `bad.sql:2: ERROR: column "nosuchcolumn" does not exist (statement: select nosuchcolumn from t;)`},
		{"failing command", []string{"build", "-f", write("badcmd.toml", "engine = \"postgres\"\n[[load]]\nrun = \"echo nope >&2; exit 9\"\n")}, 1, "failed with exit status 9; output ends: nope"},
		{"engine not found", []string{"build", "-f", write("bindir.toml", "engine = \"postgres\"\nbindir = \"/opt/nopg/bin\"\n")}, 4, "apt-get install postgresql"},
		{"version not found", []string{"build", "-f", write("ver.toml", "engine = \"postgres\"\nversion = \"9\"\n")}, 4, "PostgreSQL 9 server binaries not found (looked in"},
		{"unknown backend", []string{"up", "--backend", "zfs"}, 2, `unknown backend "zfs"`},
		{"unusable backend", []string{"up", "--backend", "btrfs"}, 4, "backend btrfs does not work here"},
		{"down without ids", []string{"down"}, 2, "give instance ids or --all"},
		{"down unknown id", []string{"down", "abcdef12"}, 3, "instance abcdef12 not found"},
		{"down bad id", []string{"down", "../../etc"}, 2, "ids are 8 hex digits"},
		{"run without command", []string{"run"}, 2, "run needs a command after --"},
		{"run unknown command", []string{"run", "--", "no-such-cmd-xyz"}, 3, `command "no-such-cmd-xyz" not found`},
		{"unknown flag", []string{"build", "--frobnicate"}, 2, "unknown flag: --frobnicate"},
		{"extra argument", []string{"build", "extra"}, 2, "build takes no arguments"},
		{"protected setting", []string{"up", "-f", write("listen.toml", "engine = \"postgres\"\n[settings]\nlisten_addresses = \"127.0.0.2\"\nunix_socket_permissions = \"0777\"\nwork_mem = \"8MB\"\n")}, 2, "recipe [settings]: listen_addresses, unix_socket_permissions are set by dbfork"},
		{"protected mariadb option", []string{"up", "-f", write("bind.toml", "engine = \"mariadb\"\n[settings]\nloose_bind = \"0.0.0.0\"\n")}, 2, "recipe [settings]: loose_bind is set by dbfork"},
		{"bad store size", []string{"store", "init", "--size", "lots"}, 2, "size \"LOTS\""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.run(c.args...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, c.code, r.stderr)
			}
			msg := strings.TrimSuffix(r.stderr, "\n")
			if !strings.HasPrefix(msg, "dbfork: ") || strings.Contains(msg, "\n") {
				t.Errorf("stderr is not one dbfork: line: %q", r.stderr)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("stderr %q does not contain %q", msg, c.want)
			}
		})
	}
	if ls := e.ls(); len(ls.Goldens) > 1 {
		t.Errorf("failed builds published goldens: %+v", ls.Goldens)
	}
	e.assertNothingLeft()
}
