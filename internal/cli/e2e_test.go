package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/testenv"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dbfork-bin-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "dbfork")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/dbfork").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build dbfork: %v\n%s", err, out)
		os.Exit(1)
	}
	// -short: the main path end to end, bad input, and the caller's
	// rights and environment; the full tier has every command, engine,
	// crash phase and attack.
	code := testenv.RunTiers(m, `^(TestBuildUpLsDownRun|TestBadInputGetsOneLineErrors|TestRunStepsGetTheCallersEnvironment|TestRootDaemonRefusesOtherUsers|TestVersionCommand)$`, "")
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is one test's world: a store and a project dir with a recipe.
type env struct {
	t     *testing.T
	root  string
	store string
	proj  string
}

func newEnv(t *testing.T) *env {
	root := testenv.Dir(t)
	e := &env{t: t, root: root, store: filepath.Join(root, "store"), proj: filepath.Join(root, "proj")}
	testenv.ShopRecipe(t, e.proj, 3000)
	t.Cleanup(func() {
		// Whatever a test did, it must not leave servers or mounts.
		e.run("gc", "--all")
		testenv.AssertClean(t, root)
	})
	return e
}

type result struct {
	code           int
	stdout, stderr string
}

func (e *env) cmd(args ...string) *exec.Cmd {
	c := exec.Command(bin, append([]string{"--store", e.store}, args...)...)
	c.Dir = e.proj
	// Tests make many stores: plain ones, unless a test is about the
	// automatic image (TestStoreMakesItselfFast clears this).
	c.Env = append(os.Environ(), "DBFORK_STORE=", "DBFORK_STORE_FS=plain")
	return c
}

func (e *env) run(args ...string) result {
	return e.runEnv(nil, args...)
}

func (e *env) runEnv(extra []string, args ...string) result {
	c := e.cmd(args...)
	c.Env = append(c.Env, extra...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func (e *env) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("dbfork %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

type lsOut struct {
	Goldens   []struct{ Key string } `json:"goldens"`
	Instances []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		DSN    string `json:"dsn"`
	} `json:"instances"`
}

func (e *env) ls() lsOut {
	var out lsOut
	r := e.mustRun("ls", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("ls --json: %v: %s", err, r.stdout)
	}
	return out
}

// assertNothingLeft checks the store holds no instance, no build dir, no
// server and no mount.
func (e *env) assertNothingLeft() {
	e.t.Helper()
	if got := e.ls().Instances; len(got) > 0 {
		e.t.Errorf("instances left: %+v", got)
	}
	if left := testenv.TmpBuilds(e.store); len(left) > 0 {
		e.t.Errorf("build dirs left: %v", left)
	}
	if pids := testenv.ServersUnder(e.store); len(pids) > 0 {
		e.t.Errorf("servers left: %v", pids)
	}
	entries, _ := os.ReadDir(filepath.Join(e.store, "instances"))
	if len(entries) > 0 {
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		e.t.Errorf("instances dir not empty: %v", names)
	}
	testenv.AssertClean(e.t, e.root)
}

func TestBuildUpLsDownRun(t *testing.T) {
	e := newEnv(t)
	key := strings.TrimSpace(e.mustRun("build").stdout)
	if len(key) != 64 {
		t.Fatalf("build printed %q, want a key", key)
	}
	if again := strings.TrimSpace(e.mustRun("build").stdout); again != key {
		t.Fatalf("second build gave %s, want %s", again, key)
	}
	up := e.mustRun("up", "--json")
	var inst struct {
		ID, DSN, Backend string
		Env              map[string]string
	}
	if err := json.Unmarshal([]byte(up.stdout), &inst); err != nil {
		t.Fatal(err)
	}
	if inst.Backend != "overlay" || inst.Env["PGHOST"] == "" || !strings.HasPrefix(inst.DSN, "postgres://shop:") {
		t.Fatalf("up --json: %+v", inst)
	}
	out, err := exec.Command("psql", inst.DSN, "-XAtc", "select count(*) from items").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "3001" {
		t.Fatalf("query through the DSN: %v %s", err, out)
	}
	if ls := e.ls(); len(ls.Goldens) != 1 || len(ls.Instances) != 1 || ls.Instances[0].Status != "ready" {
		t.Fatalf("ls: %+v", ls)
	}
	text := e.mustRun("up").stdout
	if !strings.Contains(text, "DATABASE_URL=") || !strings.Contains(text, "PGPORT=") || !strings.Contains(text, "# dbfork instance ") {
		t.Fatalf("up output: %s", text)
	}
	if r := e.run("gc"); r.code != 0 || len(e.ls().Instances) != 2 {
		t.Fatalf("gc removed live up instances: %+v", r)
	}
	e.mustRun("down", inst.ID)
	e.mustRun("down", "--all")

	r := e.run("run", "--", "sh", "-c", `psql -XAtc "insert into items(name) values ('x'); select count(*) from items" && test -n "$DATABASE_URL" && exit 7`)
	if r.code != 7 || !strings.Contains(r.stdout, "3002") {
		t.Fatalf("run: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	e.assertNothingLeft()
}

func TestRunCleansUpOnSignals(t *testing.T) {
	e := newEnv(t)
	e.mustRun("build")
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		c := e.cmd("run", "--", "sh", "-c", "echo started; exec sleep 60")
		var out bytes.Buffer
		c.Stdout = &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Contains(out.String(), "started") })
		_ = c.Process.Signal(sig)
		err := c.Wait()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 128+int(sig) {
			t.Fatalf("run after %v: %v, want exit %d", sig, err, 128+int(sig))
		}
		e.assertNothingLeft()
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// `up` on a reflink store reads the clone in the background once it is
// ready (warm.log in the instance dir says what it read); `--no-warm`
// does not. `down` ends a reader still running with the instance.
func TestUpWarmsReflinkClonesInBackground(t *testing.T) {
	e := newEnv(t)
	e.useLoopStore("xfs", 700<<20)
	e.mustRun("build")
	up := func(args ...string) (id, dir string) {
		r := e.mustRun(append([]string{"up", "--no-daemon", "--backend", "reflink", "--json"}, args...)...)
		var v struct{ ID, Dir string }
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.ID == "" || v.Dir == "" {
			t.Fatalf("up --json: %v: %s", err, r.stdout)
		}
		return v.ID, v.Dir
	}
	id, dir := up()
	var res struct {
		Files int   `json:"files"`
		Bytes int64 `json:"bytes"`
	}
	testenv.ReadJSONLine(t, filepath.Join(dir, "warm.log"), &res)
	if res.Files < 100 || res.Bytes < 1<<20 {
		t.Errorf("background reader read %d files, %d bytes", res.Files, res.Bytes)
	}
	e.mustRun("down", id)

	id, dir = up("--no-warm")
	time.Sleep(300 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(dir, "warm.log")); !os.IsNotExist(err) {
		t.Errorf("up --no-warm: warm.log: %v, want none", err)
	}
	e.mustRun("down", id)
	// One more, taken down at once: its reader (if still reading) goes too.
	id, _ = up()
	e.mustRun("down", id)
	e.assertNothingLeft()
}
