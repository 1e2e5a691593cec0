package dbforktest_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/dbforktest"
	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

func setup(t *testing.T) (storeDir, recipe string) {
	testenv.RequireRoot(t)
	root := testenv.Dir(t)
	recipe = testenv.WriteRecipe(t, filepath.Join(root, "proj"), `
engine = "postgres"
[[load]]
sql = ["seed.sql"]
[pool]
min = 1
max = 4
`, map[string]string{"seed.sql": "create table t(v text); insert into t values ('golden');\n"})
	storeDir = filepath.Join(root, "store")
	t.Setenv("DBFORK_STORE", storeDir)
	return storeDir, recipe
}

// conn connects to dsn for the rest of the test.
func conn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func rows(t *testing.T, dsn string) string {
	t.Helper()
	var s string
	if err := conn(t, dsn).QueryRow(context.Background(), "select string_agg(v, ',' order by v) from t").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, dsn, v string) {
	t.Helper()
	if _, err := conn(t, dsn).Exec(context.Background(), "insert into t values ($1)", v); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, storeDir string) int {
	s, err := store.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	ins, _ := instance.List(s)
	return len(ins)
}

// Two tests get two independent databases, removed when they end, with
// and without a daemon.
func TestNewIsolatedAndRemoved(t *testing.T) {
	for _, withDaemon := range []bool{false, true} {
		name := map[bool]string{false: "in-process", true: "serve"}[withDaemon]
		t.Run(name, func(t *testing.T) {
			storeDir, recipe := setup(t)
			var d *daemon.Daemon
			if withDaemon {
				d = startDaemon(t, storeDir)
			}
			var dsns []string
			for _, who := range []string{"a", "b"} {
				t.Run(who, func(t *testing.T) {
					in := dbforktest.Open(t, recipe)
					write(t, in.DSN, who)
					if got := rows(t, in.DSN); got != who+",golden" {
						t.Errorf("test %s sees %q", who, got)
					}
					if in.Env["DATABASE_URL"] != in.DSN || in.Env["DBFORK_INSTANCE"] != in.ID {
						t.Errorf("env %v", in.Env)
					}
					dsns = append(dsns, in.DSN)
				})
			}
			if len(dsns) != 2 || dsns[0] == dsns[1] {
				t.Fatalf("dsns %v", dsns)
			}
			if withDaemon {
				if ls := d.Leases(); len(ls) != 0 {
					t.Errorf("leases left: %+v", ls)
				}
				return // the pool's warm instance goes when the daemon closes
			}
			if n := count(t, storeDir); n != 0 {
				t.Errorf("%d instances left", n)
			}
		})
	}
}

func startDaemon(t *testing.T, storeDir string) *daemon.Daemon {
	s, err := store.Open(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	d := daemon.New(daemon.Options{Store: s, OpenEngine: engines.Open})
	ln, err := net.Listen("unix", api.SocketPath(storeDir))
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(d, "", nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return d
}

// With DBFORK_KEEP_FAILED=1 a failed test's instance stays up and its DSN
// is logged; without it, it is removed like any other.
func TestKeepFailed(t *testing.T) {
	if os.Getenv("DBFORK_HELPER") != "" {
		dsn := dbforktest.New(t, os.Getenv("DBFORK_HELPER"))
		write(t, dsn, "evidence")
		t.Fatal("failing on purpose")
	}
	storeDir, recipe := setup(t)
	for _, keepIt := range []bool{true, false} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKeepFailed$", "-test.v")
		cmd.Env = append(os.Environ(), "DBFORK_HELPER="+recipe, "DBFORK_STORE="+storeDir)
		if keepIt {
			cmd.Env = append(cmd.Env, "DBFORK_KEEP_FAILED=1")
		} else {
			cmd.Env = append(cmd.Env, "DBFORK_KEEP_FAILED=")
		}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "failing on purpose") {
			t.Fatalf("helper test did not fail: %v\n%s", err, out)
		}
		m := regexp.MustCompile(`kept instance ([0-9a-f]{8}) of the failed test: (\S+)`).FindStringSubmatch(string(out))
		if !keepIt {
			if m != nil || count(t, storeDir) != 0 {
				t.Fatalf("instance kept without %s:\n%s", dbforktest.KeepEnv, out)
			}
			continue
		}
		if m == nil {
			t.Fatalf("no kept instance logged:\n%s", out)
		}
		if got := rows(t, m[2]); got != "evidence,golden" {
			t.Errorf("kept instance holds %q", got)
		}
		s, _ := store.Open(storeDir)
		if err := instance.Down(context.Background(), s, m[1]); err != nil {
			t.Fatal(err)
		}
	}
}
