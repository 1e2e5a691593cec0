package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

func mariadbEnv(t *testing.T) *env {
	if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
		if _, err := exec.LookPath("mariadbd"); err != nil && os.Getenv("CI") == "" {
			t.Skip("MariaDB is not installed (apt-get install mariadb-server); CI installs it")
		}
	}
	e := newEnv(t)
	e.proj = filepath.Join(e.root, "maria")
	testenv.WriteRecipe(t, e.proj, `
engine = "mariadb"
database = "shop"
owner = "shop"

[[load]]
sql = "seed.sql"

[[load]]
run = "mariadb -u \"$MYSQL_USER\" \"$MYSQL_DATABASE\" -e \"INSERT INTO items(name) VALUES ('cmd')\""
`, map[string]string{"seed.sql": "CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text);\nINSERT INTO items(name) SELECT CONCAT('i', seq) FROM seq_1_to_3000;\n"})
	return e
}

// The same commands and the same crash guarantees as PostgreSQL.
func TestMariaDBThroughEveryCommand(t *testing.T) {
	e := mariadbEnv(t)
	for _, phase := range []string{"build:launched", "build:started", "build:loaded", "build:manifest", "up:cloned", "up:started", "run:child"} {
		args := []string{"up"}
		switch {
		case strings.HasPrefix(phase, "build:"):
			args = []string{"build"}
		case strings.HasPrefix(phase, "run:"):
			args = []string{"run", "--", "sleep", "0.1"}
		}
		r := e.runEnv([]string{"DBFORK_CRASH_AT=" + phase}, args...)
		if r.code != -1 {
			t.Fatalf("not killed at %s: exit %d %s", phase, r.code, r.stderr)
		}
		e.mustRun("gc")
		e.assertNothingLeft()
	}
	var inst struct {
		ID  string
		Env map[string]string
		DSN string
	}
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &inst); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(inst.DSN, "mysql://shop:") || inst.Env["MYSQL_PWD"] == "" || inst.Env["MYSQL_GO_DSN"] == "" {
		t.Fatalf("up --json: %+v", inst)
	}
	r := e.run("run", "--", "sh", "-c", `mariadb -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" -N -e "SELECT COUNT(*) FROM items" "$MYSQL_DATABASE"`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "3001" {
		t.Fatalf("run: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if ls := e.ls(); len(ls.Instances) != 1 || ls.Instances[0].Status != "ready" {
		t.Fatalf("ls: %+v", ls)
	}
	e.mustRun("down", inst.ID)
	e.assertNothingLeft()
}
