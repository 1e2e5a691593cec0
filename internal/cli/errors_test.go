package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
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
		// SQL and dump inputs are loaded from private copies of what was
		// hashed (TestInputChangedAndRestoredDuringBuild); a run step's
		// inputs are read by its command, so they are checked again.
		{"input changed during the build", []string{"build", "-f", write("changing.toml", "engine = \"postgres\"\n[[load]]\nrun = \"cat changing.sql >/dev/null\"\ninputs = [\""+write("changing.sql", "create table c(v int);\n")+"\"]\n[[load]]\nrun = \"echo 'drop table c;' >> changing.sql\"\n")}, 1, "changing.sql changed while the build read it: nothing published; run again"},
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

// A failed build's log holds seed data and command output: it is kept
// for the user who asked for the build alone (issue 12 M2).
func TestFailedBuildLogIsPrivate(t *testing.T) {
	e := newEnv(t)
	if err := os.WriteFile(filepath.Join(e.proj, "bad.sql"), []byte("create table secret(v text);\ninsert into secret values ('s3cr3t');\nselect nosuchcolumn from secret;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.proj, "bad.toml"), []byte("engine = \"postgres\"\n[[load]]\nsql = \"bad.sql\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.runEnv([]string{"SUDO_UID=65534", "SUDO_GID=65534"}, "build", "-f", "bad.toml")
	m := regexp.MustCompile(`\(build log: (\S+)\)`).FindStringSubmatch(r.stderr)
	if r.code != 1 || m == nil {
		t.Fatalf("exit %d, stderr %q: want a failed build pointing at its log", r.code, r.stderr)
	}
	log := m[1]
	if filepath.Dir(log) != filepath.Join(e.store, "logs", "uid-65534") {
		t.Errorf("log %s is not in the caller's own dir", log)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Dir(log), 0o700 | os.ModeDir}, {log, 0o600}} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != c.mode || st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s: mode %v uid %d gid %d; want %v owned by 65534", c.path, fi.Mode(), st.Uid, st.Gid, c.mode)
		}
	}
	// A link the user planted at the log's name is replaced, not written
	// through.
	victim := filepath.Join(e.root, "victim")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, log); err != nil {
		t.Fatal(err)
	}
	e.runEnv([]string{"SUDO_UID=65534", "SUDO_GID=65534"}, "build", "-f", "bad.toml")
	if b, _ := os.ReadFile(victim); string(b) != "root's\n" {
		t.Errorf("the build log was written through a planted link: %q", b)
	}
	if fi, err := os.Lstat(log); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("log after a planted link: %v %v", fi, err)
	}
}
