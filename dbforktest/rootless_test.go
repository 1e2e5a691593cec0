package dbforktest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/dbforktest"
	"github.com/dbfork/dbfork/internal/testenv"
)

// asUserEnv marks the run of this test binary that plays the user.
const asUserEnv = "DBFORKTEST_AS_USER_RECIPE"

// `go test` works for an ordinary user with no store configured (issue
// 18): this test binary runs itself again as the user, whose tests get
// databases from the user's own daemon (`dbfork daemon start` found on
// PATH) on the default store in their home, as userns-overlay clones;
// afterwards the daemon leaves by itself, with every server and mount.
func TestRootlessGoTest(t *testing.T) {
	if recipe := os.Getenv(asUserEnv); recipe != "" {
		userRole(t, recipe)
		return
	}
	testenv.RequireRoot(t)
	bin := dbforkBin(t)
	home := testenv.UserDir(t)
	for _, d := range []string{"bin", "proj"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyExec(t, bin, filepath.Join(home, "bin", "dbfork"))
	copyExec(t, os.Args[0], filepath.Join(home, "bin", "dbforktest.test"))
	recipe := testenv.WriteRecipe(t, filepath.Join(home, "proj"), "engine = \"postgres\"\n[[load]]\nsql = [\"seed.sql\"]\n",
		map[string]string{"seed.sql": "create table t(v text); insert into t values ('golden');\n"})
	testenv.ChownToUser(t, home)
	_ = filepath.Walk(home, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, testenv.UserUID, testenv.UserGID)
		}
		return err
	})
	c := exec.Command(filepath.Join(home, "bin", "dbforktest.test"), "-test.run", "^TestRootlessGoTest$", "-test.count=1", "-test.v", "-test.parallel=2")
	c.Dir = filepath.Join(home, "proj")
	c.Env = []string{"PATH=" + filepath.Join(home, "bin") + ":/usr/bin:/bin", "HOME=" + home, "LANG=C",
		"DBFORK_DAEMON_IDLE=2s", asUserEnv + "=" + recipe}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	out, err := c.CombinedOutput()
	if err != nil || strings.Count(string(out), "--- PASS: TestRootlessGoTest/") != 2 {
		t.Fatalf("go test as uid %d: %v\n%s", testenv.UserUID, err, out)
	}
	store := filepath.Join(home, ".local", "share", "dbfork")
	deadline := time.Now().Add(60 * time.Second)
	// The daemon leaves once idle; it removes the instances last.
	left := func() []string {
		ids, _ := os.ReadDir(filepath.Join(store, "instances"))
		var names []string
		for _, e := range ids {
			names = append(names, e.Name())
		}
		return names
	}
	for len(testenv.ServersUnder(store)) > 0 || len(testenv.MountsInAnyNamespace(store)) > 0 || len(left()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left after the run: processes %v, mounts %v, instances %v",
				testenv.ServersUnder(store), testenv.MountsInAnyNamespace(store), left())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// userRole is what the user's `go test` does: two parallel tests, each
// with its own clone.
func userRole(t *testing.T, recipe string) {
	for _, name := range []string{"a", "b"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db := dbforktest.Open(t, recipe)
			if db.Backend != "userns-overlay" {
				t.Errorf("backend %q, want userns-overlay (clones without root)", db.Backend)
			}
			write(t, db.DSN, name)
			if got := rows(t, db.DSN); got != name+",golden" { // sorted
				t.Fatalf("rows %q: another test's write is visible", got)
			}
		})
	}
}

func copyExec(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
