// Package enginetest is the one suite every engine passes against real
// servers: the engine driven alone (driver.go), golden builds (cache,
// rebuild, failures, dumps) and instances on every clone backend the
// machine can make.
package enginetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Dialect is what the suite needs to know about an engine.
type Dialect struct {
	Engine string // recipe engine name
	New    func(ctx context.Context) (engine.Engine, error)
	// Open connects to an instance over TCP with its DSN.
	Open func(c engine.Conn) (*sql.DB, error)
	// Seed returns a load step's SQL that creates table items with n rows.
	Seed func(n int) string
	// Command is a run step that inserts one row via the engine's CLI.
	Command string
	// BadSQL is a file whose line 3 holds a failing statement.
	BadSQL string
	// Bare is the engine's command-line client counting items with no
	// connection options at all: the instance's env must be enough (what
	// `dbfork run -- CLIENT` relies on). Empty: not checked.
	Bare []string
	// Dump writes a dump of the instance's database to path.
	Dump func(t *testing.T, c engine.Conn, path string)
}

// Run runs the whole suite.
func Run(t *testing.T, d Dialect) {
	eng, err := d.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("driver", func(t *testing.T) { testDriver(t, d, eng) })
	t.Run("build", func(t *testing.T) { testBuild(t, d, eng) })
	t.Run("failures", func(t *testing.T) { testFailures(t, d, eng) })
	t.Run("instances", func(t *testing.T) { testInstances(t, d, eng) })
	t.Run("dump", func(t *testing.T) { testDump(t, d, eng) })
}

func (d Dialect) recipe(t *testing.T, dir string, rows int) *recipe.Recipe {
	path := testenv.WriteRecipe(t, dir, "engine = \""+d.Engine+"\"\ndatabase = \"shop\"\nowner = \"shop\"\n"+
		"[[load]]\nsql = [\"seed/*.sql\"]\n[[load]]\nrun = \""+strings.ReplaceAll(d.Command, `"`, `\"`)+"\"\n",
		map[string]string{"seed/01.sql": d.Seed(rows)})
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openStore(t *testing.T, root string) *store.Store {
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testBuild(t *testing.T, d Dialect, eng engine.Engine) {
	root := testenv.Dir(t)
	s := openStore(t, root)
	ctx := context.Background()
	res, err := golden.Build(ctx, s, eng, d.recipe(t, filepath.Join(root, "p"), 500), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Built || res.Golden.Manifest.Engine != d.Engine || noFiles(res.Golden.Manifest) {
		t.Fatalf("first build: %+v", res)
	}
	again, err := golden.Build(ctx, s, eng, d.recipe(t, filepath.Join(root, "p"), 500), golden.Options{})
	if err != nil || again.Built || again.Golden.Key != res.Golden.Key {
		t.Fatalf("unchanged recipe: built=%v err=%v", again != nil && again.Built, err)
	}
	changed, err := golden.Build(ctx, s, eng, d.recipe(t, filepath.Join(root, "p"), 501), golden.Options{})
	if err != nil || !changed.Built || changed.Golden.Key == res.Golden.Key {
		t.Fatalf("changed seed did not rebuild: %v", err)
	}
	testenv.AssertClean(t, root)
}

func testFailures(t *testing.T, d Dialect, eng engine.Engine) {
	root := testenv.Dir(t)
	s := openStore(t, root)
	cases := map[string]struct {
		toml  string
		files map[string]string
		want  []string
	}{
		"sql":     {"[[load]]\nsql = \"bad.sql\"\n", map[string]string{"bad.sql": d.BadSQL}, []string{"bad.sql:3:", "statement:"}},
		"command": {"[[load]]\nrun = \"echo out; echo err >&2; exit 4\"\n", map[string]string{}, []string{"exit status 4", "out | err"}},
	}
	for name, c := range cases {
		path := testenv.WriteRecipe(t, filepath.Join(root, name), "engine = \""+d.Engine+"\"\n"+c.toml, c.files)
		r, err := recipe.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = golden.Build(context.Background(), s, eng, r, golden.Options{})
		if err == nil {
			t.Fatalf("%s: build succeeded", name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %q lacks %q or is not one line", name, err, w)
			}
		}
	}
	if left := testenv.TmpBuilds(s.Root); len(left) > 0 {
		t.Errorf("failed builds left %v", left)
	}
	if all, _ := golden.List(s); len(all) > 0 {
		t.Error("a failed build was published")
	}
	testenv.AssertClean(t, root)
}

func testInstances(t *testing.T, d Dialect, eng engine.Engine) {
	matrix, roots := instanceMatrix(t)
	for _, m := range matrix {
		t.Run(m.fs, func(t *testing.T) {
			root := roots(t, m.fs)
			s := openStore(t, root)
			res, err := golden.Build(context.Background(), s, eng, d.recipe(t, filepath.Join(root, "p"), 2000), golden.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range append([]string{"auto"}, m.backends...) {
				t.Run(b, func(t *testing.T) {
					checkPair(t, d, eng, s, res.Golden, b, map[string]string{"auto": m.auto}[b])
				})
			}
			testenv.AssertClean(t, root)
			testenv.AssertNoMountsAnywhere(t, root)
		})
	}
	t.Run("port taken", func(t *testing.T) { testPortTaken(t, eng, d) })
	t.Run("start failure", func(t *testing.T) {
		root := testenv.Dir(t)
		s := openStore(t, root)
		res, err := golden.Build(context.Background(), s, eng, d.recipe(t, filepath.Join(root, "p"), 10), golden.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = instance.Create(context.Background(), s, eng, res.Golden, instance.Options{
			Backend: "copy", Settings: map[string]string{"no_such_setting_xyz": "1"},
		})
		if err == nil || !strings.Contains(err.Error(), "server log") || !strings.Contains(strings.ToLower(err.Error()), "no_such_setting_xyz") && !strings.Contains(err.Error(), "no-such-setting-xyz") {
			t.Fatalf("start failure without the log tail naming the setting: %v", err)
		}
		if entries, _ := os.ReadDir(s.InstancesDir()); len(entries) > 0 {
			t.Fatalf("failed start left %d entries", len(entries))
		}
		testenv.AssertClean(t, root)
	})
}

func checkPair(t *testing.T, d Dialect, eng engine.Engine, s *store.Store, g *golden.Golden, backend, wantAuto string) {
	ctx := context.Background()
	var dbs []*sql.DB
	var ins []*instance.Instance
	for i := 0; i < 2; i++ {
		in, err := instance.Create(ctx, s, eng, g, instance.Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		defer in.Destroy(ctx, s)
		db, err := d.Open(*in.State.Conn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		ins, dbs = append(ins, in), append(dbs, db)
	}
	if wantAuto != "" && ins[0].State.Backend != wantAuto {
		t.Fatalf("auto chose %s, want %s", ins[0].State.Backend, wantAuto)
	}
	checkListening(t, ins[0].State.Server)
	if n := count(t, dbs[0]); n != 2001 {
		t.Fatalf("clone has %d rows, want 2001", n)
	}
	if len(d.Bare) > 0 {
		if out := RunCLI(t, *ins[0].State.Conn, d.Bare[0], d.Bare[1:]...); strings.TrimSpace(out) != "2001" {
			t.Fatalf("%s with the instance env only: %q, want 2001", d.Bare[0], out)
		}
	}
	if _, err := dbs[0].ExecContext(ctx, "INSERT INTO items(name) VALUES ('only-in-a')"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, dbs[1]); n != 2001 {
		t.Fatalf("a write to one instance reached another: %d rows", n)
	}
	c := *ins[0].State.Conn
	c.Env = nil
	c.URL = strings.Replace(c.URL, ins[0].State.Server.Password, "wrong", 1)
	if bad, err := d.Open(c); err == nil {
		err = bad.PingContext(ctx)
		bad.Close()
		if err == nil {
			t.Fatal("a wrong password was accepted over TCP")
		}
	}
	checkResetAndRecycle(t, d, eng, s, g, backend, ins, dbs)
	for _, in := range ins {
		if err := in.Destroy(ctx, s); err != nil {
			t.Fatal(err)
		}
		if in.State.Server.Process.Alive() {
			t.Fatal("server alive after Destroy")
		}
		if _, err := os.Stat(in.State.Dir); !os.IsNotExist(err) {
			t.Fatalf("instance dir left: %v", err)
		}
	}
}

// checkResetAndRecycle resets ins[0] in place (a restore where the clone
// is a plain dir) and recycles ins[1] into a new instance where the
// backend can: each then has the golden's rows and not a table made
// before. ins[1] becomes the recycled instance.
func checkResetAndRecycle(t *testing.T, d Dialect, eng engine.Engine, s *store.Store, g *golden.Golden, backend string, ins []*instance.Instance, dbs []*sql.DB) {
	ctx := context.Background()
	for _, db := range dbs {
		if _, err := db.ExecContext(ctx, "CREATE TABLE made_by_test(a int)"); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	if err := ins[0].Reset(ctx, s, eng, g, nil); err != nil {
		t.Fatalf("reset on %s: %v", backend, err)
	}
	checkGoldenState(t, d, *ins[0].State.Conn, "after a reset")
	oldID, oldPW := ins[1].State.ID, ins[1].State.Server.Password
	nin, err := ins[1].Recycle(ctx, s, eng, g, instance.Options{Backend: ins[1].State.Backend})
	if errors.Is(err, errs.ErrUnsupported) {
		return // a mounted clone: released instances are destroyed instead
	}
	if err != nil {
		t.Fatalf("recycle on %s: %v", backend, err)
	}
	t.Cleanup(func() { _ = nin.Destroy(context.Background(), s) }) // idempotent
	if nin.State.ID == oldID || nin.State.Server.Password == oldPW {
		t.Fatalf("recycled instance kept the old id or password")
	}
	ins[1] = nin
	checkGoldenState(t, d, *nin.State.Conn, "after a recycle")
}

func checkGoldenState(t *testing.T, d Dialect, c engine.Conn, when string) {
	db, err := d.Open(c)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db); n != 2001 {
		t.Fatalf("%s: %d rows, want the golden's 2001", when, n)
	}
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'made_by_test'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%s: a table made before is still there (%d, %v)", when, n, err)
	}
}

func count(t *testing.T, db *sql.DB) int {
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM items").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func testDump(t *testing.T, d Dialect, eng engine.Engine) {
	root := testenv.Dir(t)
	s := openStore(t, root)
	ctx := context.Background()
	res, err := golden.Build(ctx, s, eng, d.recipe(t, filepath.Join(root, "p"), 300), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := instance.Create(ctx, s, eng, res.Golden, instance.Options{Backend: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(root, "dumps", "shop.dump")
	if err := os.MkdirAll(filepath.Dir(dump), 0o755); err != nil {
		t.Fatal(err)
	}
	d.Dump(t, *in.State.Conn, dump)
	if err := in.Destroy(ctx, s); err != nil {
		t.Fatal(err)
	}
	path := testenv.WriteRecipe(t, filepath.Join(root, "fromdump"), "engine = \""+d.Engine+"\"\ndatabase = \"copy\"\nowner = \"shop\"\n[[load]]\ndump = \""+dump+"\"\n", map[string]string{})
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g2, err := golden.Build(ctx, s, eng, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	in2, err := instance.Create(ctx, s, eng, g2.Golden, instance.Options{Backend: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	defer in2.Destroy(ctx, s)
	db, err := d.Open(*in2.State.Conn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := count(t, db); n != 301 {
		t.Fatalf("restored %d rows, want 301", n)
	}
}

// RunCLI runs a client program with the instance's environment.
func RunCLI(t *testing.T, c engine.Conn, name string, args ...string) string {
	cmd := exec.Command(engine.ClientCommand(name, c.Env), args...)
	cmd.Env = engine.WithClientPath(os.Environ(), c.Env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
	return string(out)
}

// checkListening asserts a server listens on 127.0.0.1 only (no wildcard
// or other address on its port) and that its socket dir is private.
func checkListening(t *testing.T, srv *engine.Server) {
	t.Helper()
	port := fmt.Sprintf(":%04X ", srv.Port)
	var addrs []string
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(data), "\n")[1:] {
			fields := strings.Fields(line)
			if len(fields) > 3 && fields[3] == "0A" && strings.Contains(fields[1]+" ", port) { // 0A: LISTEN
				addrs = append(addrs, fields[1])
			}
		}
	}
	if len(addrs) != 1 || addrs[0] != fmt.Sprintf("0100007F:%04X", srv.Port) {
		t.Errorf("server on port %d listens on %v, want only 127.0.0.1", srv.Port, addrs)
	}
	if fi, err := os.Stat(srv.SocketDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket dir %s: %v %v, want mode 0700", srv.SocketDir, fi.Mode().Perm(), err)
	}
}

// testPortTaken holds a loopback port and makes it the one picked for a
// new instance: the server finds it taken and is started again on
// another. When every try collides, the error says why, with the log.
func testPortTaken(t *testing.T, eng engine.Engine, d Dialect) {
	root := testenv.Dir(t)
	s := openStore(t, root)
	res, err := golden.Build(context.Background(), s, eng, d.recipe(t, filepath.Join(root, "p"), 10), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := l.Addr().(*net.TCPAddr).Port

	in, err := instance.Create(context.Background(), s, eng, res.Golden, instance.Options{Backend: "auto", TryPorts: []int{held, held}})
	if err != nil {
		t.Fatalf("a taken port was not retried: %v", err)
	}
	if in.State.Server.Port == held || in.State.Server.Port == 0 {
		t.Fatalf("instance runs on port %d, the held one is %d", in.State.Server.Port, held)
	}
	db, err := d.Open(*in.State.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, db); n == 0 {
		t.Fatal("retried instance has no rows")
	}
	db.Close()
	if err := in.Destroy(context.Background(), s); err != nil {
		t.Fatal(err)
	}

	_, err = instance.Create(context.Background(), s, eng, res.Golden, instance.Options{Backend: "auto", TryPorts: []int{held, held, held, held, held}})
	if err == nil || !strings.Contains(err.Error(), "already in use") {
		t.Fatalf("five collisions: want an error with the log's \"already in use\", got %v", err)
	}
	testenv.AssertClean(t, root)
}

// noFiles: m lists no file (or cannot say).
func noFiles(m *golden.Manifest) bool {
	files, err := m.Files()
	return err != nil || len(files) == 0
}
