package instance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A test's SQL runs programs as its server's uid (COPY … FROM PROGRAM as
// the superuser every recipe owner is). From inside instance A, nothing
// of instance B may be reachable: its socket (B's password or not), its
// dir, clone, upper dir and log, its server (signals), nor the golden.
// The same probes against A itself must work, or they prove nothing.
func TestInstancesCannotReachEachOther(t *testing.T) {
	testenv.RequireRoot(t)
	for _, m := range []struct{ fs, backends string }{{"host", "overlay,copy"}, {"btrfs", "btrfs,reflink"}} {
		t.Run(m.fs, func(t *testing.T) {
			root := testenv.Dir(t)
			if m.fs != "host" {
				root = testenv.LoopFS(t, m.fs, 700<<20)
			}
			s, pg, g := buildShop(t, root)
			for _, b := range strings.Split(m.backends, ",") {
				t.Run(b, func(t *testing.T) { checkApart(t, s, pg, g, b, root) })
			}
			testenv.AssertClean(t, root)
		})
	}
}

func checkApart(t *testing.T, s *store.Store, pg *postgres.Postgres, g *golden.Golden, backend, root string) {
	ctx := context.Background()
	a, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(ctx, s)
	b, err := instance.Create(ctx, s, pg, g, instance.Options{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy(ctx, s)
	out := sqlProgram(t, a.State.Conn.URL, filepath.Join(root, "probe.sh"), probeScript(pg, a.State, b.State, g))
	checkProbes(t, out)
	// What the test started in A ends with A.
	bg := background(t, a.State.Conn.URL, root)
	if err := a.Destroy(ctx, s); err != nil {
		t.Fatal(err)
	}
	if bg.Alive() {
		t.Fatalf("a process started by A's SQL (pid %d) outlived A", bg.PID)
	}
	// ...with a reset of B back to the golden...
	bg = background(t, b.State.Conn.URL, root)
	if err := b.Reset(ctx, s, pg, g, nil); err != nil {
		t.Fatal(err)
	}
	if bg.Alive() {
		t.Fatalf("a process started by B's SQL (pid %d) outlived a reset", bg.PID)
	}
	// ...and with gc when the process holding B died without tearing it
	// down.
	bg = background(t, b.State.Conn.URL, root)
	b.Release()
	instance.GC(ctx, s, false)
	if bg.Alive() {
		t.Fatalf("a process started by B's SQL (pid %d) outlived gc", bg.PID)
	}
}

// probeScript tries, as whoever runs it, to reach B's and the golden's
// things ("name rc" per line; foreign probes must fail), and A's own
// (own-* probes must work).
func probeScript(pg *postgres.Postgres, a, b *instance.State, g *golden.Golden) string {
	psql := filepath.Join(pg.ClientBindir, "psql")
	conn := func(srv *instance.State, pw string) string {
		return fmt.Sprintf("PGPASSWORD=%s %s -X -w -h %s -p %d -U %s -d %s -Atc 'select 1'",
			pw, psql, srv.Server.SocketDir, srv.Server.Port, srv.Server.User, srv.Server.Database)
	}
	probes := [][2]string{
		{"own-socket", conn(a, "")},
		{"own-read", "cat " + filepath.Join(a.DataDir, "PG_VERSION")},
		{"socket", conn(b, "")},
		{"socket-with-password", conn(b, b.Server.Password)},
		{"list-dir", "ls " + b.Dir},
		{"read-data", "cat " + filepath.Join(b.DataDir, "PG_VERSION")},
		{"write-data", "touch " + filepath.Join(b.DataDir, "base", "probe")},
		{"read-upper", "ls " + filepath.Join(b.Scratch, "upper", "base")},
		{"read-log", "cat " + filepath.Join(b.Dir, "server.log")},
		{"signal", fmt.Sprintf("kill -0 %d", b.Server.Process.PID)},
		{"read-golden", "cat " + filepath.Join(g.DataDir(), "PG_VERSION")},
	}
	var sb strings.Builder
	for _, p := range probes {
		fmt.Fprintf(&sb, "%s >/dev/null 2>&1; echo \"%s $?\"\n", p[1], p[0])
	}
	return sb.String()
}

func checkProbes(t *testing.T, out string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rc, _ := strings.Cut(line, " ")
		n++
		own := strings.HasPrefix(name, "own-")
		if own && rc != "0" {
			t.Errorf("probe %s failed against the instance itself (rc %s): the probes prove nothing", name, rc)
		}
		if !own && rc == "0" {
			t.Errorf("probe %s worked: the other instance or build was within reach", name)
		}
	}
	if n < 4 {
		t.Fatalf("probe output incomplete: %q", out)
	}
}

// sqlProgram runs script in the server behind url through COPY … FROM
// PROGRAM (as the server's uid) and returns what it printed.
func sqlProgram(t *testing.T, url, path, script string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "create temp table probe_out(line text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("copy probe_out from program '/bin/sh %s'", path)); err != nil {
		t.Fatalf("COPY FROM PROGRAM: %v", err)
	}
	var out string
	if err := c.QueryRow(ctx, "select coalesce(string_agg(line, E'\\n'), '') from probe_out").Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// background has the server behind url start a detached process (its own
// session, stdio closed) and returns its identity.
func background(t *testing.T, url, dir string) proc.Identity {
	t.Helper()
	out := sqlProgram(t, url, filepath.Join(dir, "bg.sh"), "setsid sleep 1000 </dev/null >/dev/null 2>&1 &\necho $!\n")
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("background pid: %q", out)
	}
	id, err := proc.Of(pid)
	if err != nil {
		t.Fatalf("background process %d: %v", pid, err)
	}
	return id
}

// runAs runs a shell script with exactly the credentials a server of u
// runs with (what a program its SQL starts gets).
func runAs(t *testing.T, u store.User, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.Credential()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("probe as uid %d: %v\n%s", u.UID, err, out)
	}
	return string(out)
}

// A build in progress is as far out of an instance's reach as another
// instance (its data is writable until checksummed), and the other way
// round; what the build's SQL started ends with the build.
func TestBuildsAndInstancesApart(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.Dir(t)
	s, pg, g := buildShop(t, root)
	ctx := context.Background()
	a, err := instance.Create(ctx, s, pg, g, instance.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Destroy(ctx, s)
	x := filepath.Join(root, "x")
	if err := os.Mkdir(x, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(x, 0o1777); err != nil {
		t.Fatal(err)
	}
	// The build's SQL waits until the instance has probed it, then probes
	// the instance and leaves a process behind.
	wait := fmt.Sprintf(`touch %[1]s/started
i=0; while [ ! -e %[1]s/go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
cat PG_VERSION >/dev/null 2>&1; echo "own-read $?" >> %[1]s/probe
cat %[2]s/PG_VERSION >/dev/null 2>&1; echo "read-data $?" >> %[1]s/probe
ls %[3]s >/dev/null 2>&1; echo "list-dir $?" >> %[1]s/probe
kill -0 %[4]d >/dev/null 2>&1; echo "signal $?" >> %[1]s/probe
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > %[1]s/bg.pid
echo ok
`, x, a.State.DataDir, a.State.Dir, a.State.Server.Process.PID)
	if err := os.WriteFile(filepath.Join(x, "wait.sh"), []byte(wait), 0o755); err != nil {
		t.Fatal(err)
	}
	rp := testenv.WriteRecipe(t, filepath.Join(root, "wb"), "engine = \"postgres\"\ndatabase = \"wb\"\nowner = \"wb\"\n\n[[load]]\nsql = [\"wait.sql\"]\n",
		map[string]string{"wait.sql": fmt.Sprintf("create table waited(line text);\ncopy waited from program '/bin/sh %s/wait.sh';\n", x)})
	r, err := recipe.Load(rp)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := golden.Build(ctx, s, pg, r, golden.Options{}); done <- err }()
	waitFor(t, filepath.Join(x, "started"), done)
	builds := testenv.TmpBuilds(s.Root)
	if len(builds) != 1 {
		t.Fatalf("build dirs: %v", builds)
	}
	tmp := builds[0]
	var srv struct {
		Process proc.Identity `json:"process"`
	}
	readJSON(t, filepath.Join(tmp, "server.json"), &srv)
	probes := fmt.Sprintf(`cat %[1]s/PG_VERSION >/dev/null 2>&1; echo "own-read $?"
ls %[2]s >/dev/null 2>&1; echo "list-build-dir $?"
cat %[2]s/data/PG_VERSION >/dev/null 2>&1; echo "read-build-data $?"
touch %[2]s/data/probe >/dev/null 2>&1; echo "write-build-data $?"
cat %[2]s/server.log >/dev/null 2>&1; echo "read-build-log $?"
kill -0 %[3]d >/dev/null 2>&1; echo "signal-build-server $?"
`, a.State.DataDir, tmp, srv.Process.PID)
	checkProbes(t, sqlProgram(t, a.State.Conn.URL, filepath.Join(root, "probe.sh"), probes))
	if err := os.WriteFile(filepath.Join(x, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(filepath.Join(x, "probe"))
	if err != nil {
		t.Fatal(err)
	}
	checkProbes(t, string(out))
	pidText, err := os.ReadFile(filepath.Join(x, "bg.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(pidText)))
	// (A test may look at a command line; dbfork never does.)
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); pid <= 0 || err == nil && string(cmd) == "sleep\x001000\x00" {
		t.Fatalf("a process started by the build's SQL (pid %d) outlived the build", pid)
	}
}

func waitFor(t *testing.T, path string, done chan error) {
	t.Helper()
	for i := 0; i < 1200; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case err := <-done:
			t.Fatalf("build ended before it started waiting: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s never appeared", path)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}
