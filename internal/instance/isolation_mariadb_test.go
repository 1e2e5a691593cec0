package instance_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// MariaDB has no COPY … TO PROGRAM, but a test's SQL may still reach the
// filesystem (LOAD_FILE, INTO OUTFILE) or a UDF, all as the server's uid:
// what matters is what that uid can do. A program run with exactly A's
// server credentials cannot reach B's socket, files or server, while it
// can reach A's own; the two servers run as different uids.
func TestMariaDBInstancesApart(t *testing.T) {
	testenv.RequireRoot(t)
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil && os.Getenv("CI") == "" {
			t.Skip("MariaDB is not installed (apt-get install mariadb-server); CI installs it")
		}
	}
	ctx := context.Background()
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := mysql.New(ctx, mysql.MariaDB, "", "")
	if err != nil {
		t.Fatal(err)
	}
	rp := testenv.WriteRecipe(t, filepath.Join(root, "maria"), "engine = \"mariadb\"\ndatabase = \"shop\"\nowner = \"shop\"\n\n[[load]]\nsql = \"seed.sql\"\n",
		map[string]string{"seed.sql": "CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text);\nINSERT INTO items(name) VALUES ('a');\n"})
	r, err := recipe.Load(rp)
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(ctx, s, eng, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			a, err := instance.Create(ctx, s, eng, res.Golden, instance.Options{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Destroy(ctx, s)
			b, err := instance.Create(ctx, s, eng, res.Golden, instance.Options{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Destroy(ctx, s)
			ua, ub := proc.UID(a.State.Server.Process.PID), proc.UID(b.State.Server.Process.PID)
			if ua == ub || ua != a.State.UID || !store.IsDynamicUID(ua) {
				t.Fatalf("servers run as uids %d and %d (recorded %d, %d): want one dynamic uid each", ua, ub, a.State.UID, b.State.UID)
			}
			conn := func(st *instance.State, pw string) string {
				return fmt.Sprintf("MYSQL_PWD=%s %s --no-defaults -S %s -u %s -e 'select 1' %s", pw, eng.Bin.Client,
					filepath.Join(st.Server.SocketDir, "mysqld.sock"), st.Server.User, st.Server.Database)
			}
			probes := [][2]string{
				{"own-socket", conn(a.State, "")},
				{"own-read", "cat " + filepath.Join(a.State.DataDir, "ibdata1")},
				{"socket", conn(b.State, "")},
				{"socket-with-password", conn(b.State, b.State.Server.Password)},
				{"list-dir", "ls " + b.State.Dir},
				{"read-data", "cat " + filepath.Join(b.State.DataDir, "ibdata1")},
				{"write-data", "touch " + filepath.Join(b.State.DataDir, "shop", "probe")},
				{"read-upper", "ls " + filepath.Join(b.State.Scratch, "upper")},
				{"signal", fmt.Sprintf("kill -0 %d", b.State.Server.Process.PID)},
				{"read-golden", "cat " + filepath.Join(res.Golden.DataDir(), "ibdata1")},
			}
			var sb strings.Builder
			for _, p := range probes {
				fmt.Fprintf(&sb, "%s >/dev/null 2>&1; echo \"%s $?\"\n", p[1], p[0])
			}
			checkProbes(t, runAs(t, s.UserOf(a.State.UID), sb.String()))
		})
	}
	testenv.AssertClean(t, root)
}
