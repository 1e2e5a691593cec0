package cli_test

import (
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
)

// hostileProject is a project dir that nobody owns (so its recipe is not
// root's), with the given files; builds run "under sudo" by nobody.
func hostileProject(t *testing.T, e *env, name string, files map[string]string) (dir string, nobody *user.User) {
	t.Helper()
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(e.root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	giveTo(t, nobody, dir)
	for n, body := range files {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		giveTo(t, nobody, p)
	}
	return dir, nobody
}

var asNobodyBehindSudo = []string{"SUDO_UID=65534", "SUDO_GID=65534"}

// What a seed file makes the SQL client do runs as the user who asked
// for the build, not as root (issue 12 H1): psql's \! and the mariadb
// client's \! in a seed file.
func TestSeedFilesRunAsTheCaller(t *testing.T) {
	e := newEnv(t)
	for _, eng := range []string{"postgres", "mariadb"} {
		t.Run(eng, func(t *testing.T) {
			dir, nobody := hostileProject(t, e, "shell-"+eng, map[string]string{
				"dbfork.toml": "engine = \"" + eng + "\"\n[[load]]\nsql = \"shell.sql\"\n",
				"shell.sql":   "\\! id -u > ran_as.txt\n",
			})
			r := e.runEnv(asNobodyBehindSudo, "build", "-f", filepath.Join(dir, "dbfork.toml"))
			if r.code != 0 {
				t.Fatalf("build: exit %d: %s", r.code, r.stderr)
			}
			got, err := os.ReadFile(filepath.Join(dir, "ran_as.txt"))
			if err != nil {
				t.Fatalf("the seed's shell escape did not run: %v", err)
			}
			if strings.TrimSpace(string(got)) != nobody.Uid {
				t.Errorf("the seed's shell escape ran as uid %s, want %s (the user who asked)", strings.TrimSpace(string(got)), nobody.Uid)
			}
		})
	}
}

// An input the caller cannot read is not read for them, and its content
// never shows up in an error (issue 12 H1).
func TestInputsReadWithTheCallersRights(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(e.root, "secret.sql")
	if err := os.WriteFile(secret, []byte("select 'TOPSECRET' from nowhere;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, eng := range []string{"postgres", "mariadb"} {
		t.Run(eng, func(t *testing.T) {
			dir, _ := hostileProject(t, e, "steal-"+eng, map[string]string{
				"dbfork.toml": "engine = \"" + eng + "\"\n[[load]]\nsql = \"" + secret + "\"\n",
			})
			r := e.runEnv(asNobodyBehindSudo, "build", "-f", filepath.Join(dir, "dbfork.toml"))
			if r.code == 0 {
				t.Fatalf("a build as nobody read root's 0600 file")
			}
			if strings.Contains(r.stderr, "TOPSECRET") {
				t.Errorf("the error shows the unreadable file's content: %s", r.stderr)
			}
			if !strings.Contains(r.stderr, "secret.sql") {
				t.Errorf("the error does not name the input: %s", r.stderr)
			}
		})
	}
}

// As root, a recipe's bindir must be root's alone: dbfork does not run a
// `postgres -V` or `mariadbd --version` that another user can replace
// (issue 12 H1).
func TestBindirOthersCouldChange(t *testing.T) {
	e := newEnv(t)
	for _, eng := range []string{"postgres", "mariadb"} {
		t.Run(eng, func(t *testing.T) {
			probe := filepath.Join(e.root, "probe-"+eng)
			fake := "#!/bin/sh\nid -u > " + probe + "\necho 'postgres (PostgreSQL) 15.1'\necho 'mariadbd  Ver 10.11.19-MariaDB for debian-linux-gnu'\n"
			files := map[string]string{"dbfork.toml": ""}
			for _, b := range []string{"postgres", "initdb", "psql", "pg_restore", "pg_controldata", "mariadbd", "mariadb", "mariadb-install-db"} {
				files["bin/"+b] = fake
			}
			dir, nobody := hostileProject(t, e, "bindir-"+eng, nil)
			bin := filepath.Join(dir, "bin")
			if err := os.Mkdir(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			giveTo(t, nobody, bin)
			for n, body := range files {
				if n == "dbfork.toml" {
					continue
				}
				p := filepath.Join(dir, n)
				if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
					t.Fatal(err)
				}
				giveTo(t, nobody, p)
			}
			recipe := filepath.Join(dir, "dbfork.toml")
			if err := os.WriteFile(recipe, []byte("engine = \""+eng+"\"\nbindir = \""+bin+"\"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			r := e.run("build", "-f", recipe)
			if r.code != 2 || !strings.Contains(r.stderr, "only root can change") {
				t.Errorf("exit %d, stderr %q: want 2 and why the bindir is refused", r.code, r.stderr)
			}
			if _, err := os.Stat(probe); err == nil {
				t.Errorf("dbfork ran a binary from a bindir nobody owns")
			}
		})
	}
}
