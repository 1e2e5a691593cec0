package dbforktest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
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
	t.Setenv("DBFORK_STORE_FS", "plain")
	// No dbfork binary unless a test gives one: the in-process paths.
	t.Setenv("DBFORK_BIN", "")
	t.Setenv("DBFORK_SOCKET", "")
	t.Setenv("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
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

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// dbforkBin builds the dbfork command once for the tests that need one.
func dbforkBin(t *testing.T) string {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dbforktest-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "dbfork")
		if out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binPath, "../cmd/dbfork").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// daemonState runs `dbfork daemon status`: 0 when a daemon answers, 3 when
// none does.
func daemonState(t *testing.T, bin, storeDir string) int {
	err := exec.Command(bin, "--store", storeDir, "daemon", "status").Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

// Two tests get two independent databases, removed when they end: in the
// test process (no dbfork binary), from a daemon already serving the
// store, and from one `dbfork daemon start` started for the run, which
// then leaves by itself.
func TestNewIsolatedAndRemoved(t *testing.T) {
	for _, mode := range []string{"in-process", "serve", "daemon start"} {
		t.Run(mode, func(t *testing.T) {
			storeDir, recipe := setup(t)
			withDaemon := mode == "serve"
			var d *daemon.Daemon
			var bin string
			switch mode {
			case "serve":
				d = startDaemon(t, storeDir)
			case "daemon start":
				bin = dbforkBin(t)
				t.Setenv("DBFORK_BIN", bin)
				t.Setenv("DBFORK_DAEMON_IDLE", "1s")
				if n := daemonState(t, bin, storeDir); n != 3 {
					t.Fatalf("daemon status before the tests: exit %d, want 3 (none)", n)
				}
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
			if bin != "" {
				// Started once for both tests; gone with its instances
				// after the idle time.
				if n := daemonState(t, bin, storeDir); n != 0 {
					t.Fatalf("daemon status after the tests: exit %d, want 0", n)
				}
				deadline := time.Now().Add(time.Minute)
				for daemonState(t, bin, storeDir) != 3 {
					if time.Now().After(deadline) {
						t.Fatal("the daemon started for the tests did not leave when idle")
					}
					time.Sleep(200 * time.Millisecond)
				}
				// It stops answering first, then tears its pool down:
				// the instances go within the same minute.
				for count(t, storeDir) != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("%d instances left after the daemon left", count(t, storeDir))
					}
					time.Sleep(200 * time.Millisecond)
				}
				return
			}
			if withDaemon {
				if ls := d.Leases(api.Peer{}); len(ls) != 0 {
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

func TestMain(m *testing.M) {
	// -short: the daemon rule and one test's instance, kept on failure.
	code := testenv.RunTiers(m, `^(TestDaemonSocketRule|TestKeepFailed|TestNewIsolatedAndRemoved)$`, "")
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
