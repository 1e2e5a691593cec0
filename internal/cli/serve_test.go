package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
)

// syncBuf is a bytes.Buffer safe to read while a process writes it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs `dbfork serve` until the test stops it.
func (e *env) startServe(args ...string) (*exec.Cmd, *syncBuf, *api.Client) {
	e.t.Helper()
	c := e.cmd(append([]string{"serve"}, args...)...)
	out := &syncBuf{}
	c.Stderr = out
	if err := c.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	waitFor(e.t, func() bool { return strings.Contains(out.String(), "listening on") || c.ProcessState != nil })
	cl, err := api.Dial(context.Background(), filepath.Join(e.store, api.SocketName))
	if err != nil {
		e.t.Fatalf("dial serve: %v\n%s", err, out.String())
	}
	return c, out, cl
}

func (e *env) leases(c *api.Client) []api.Lease {
	e.t.Helper()
	ls, err := c.Leases(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return ls
}

// `serve` hands out warm instances to run/up, reclaims leases of killed
// clients, refuses a second daemon, and leaves nothing after SIGTERM.
func TestServe(t *testing.T) {
	e := newEnv(t)
	srv, log, c := e.startServe("-f", "dbfork.toml")
	fi, err := os.Stat(filepath.Join(e.store, api.SocketName))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	if r := e.run("serve"); r.code != 5 || !strings.Contains(r.stderr, "already runs") {
		t.Errorf("second serve: exit %d %q", r.code, r.stderr)
	}
	waitFor(t, func() bool {
		ps, _ := c.Pools(context.Background())
		return len(ps) == 1 && ps[0].Ready == 2
	})

	// run takes a warm instance from the daemon and gives it back.
	r := e.run("-v", "run", "--", "psql", "-XAtqc", "insert into items(name) values ('run'); select count(*) from items")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "3002" || !strings.Contains(r.stderr, "leased from dbfork serve") {
		t.Fatalf("run through serve: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if ls := e.leases(c); len(ls) != 0 {
		t.Errorf("run left leases: %+v", ls)
	}

	// up through the daemon: the instance leaves the pool and lives on.
	var up struct{ ID, DSN string }
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("psql", up.DSN, "-XAtc", "select count(*) from items").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "3001" {
		t.Fatalf("up instance: %v %s", err, out)
	}

	// A `dbfork run` killed with SIGKILL: its lease is reclaimed.
	pidFile := filepath.Join(e.root, "child.pid")
	killed := e.cmd("run", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 300")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(e.leases(c)) == 1 })
	leasedSeen := false
	for _, in := range e.ls().Instances {
		leasedSeen = leasedSeen || in.Status == "leased"
	}
	if !leasedSeen {
		t.Errorf("ls does not show the leased instance: %+v", e.ls().Instances)
	}
	_ = killed.Process.Kill()
	_ = killed.Wait()
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL) // the orphaned child, by the PID it recorded
		}
	}
	waitFor(t, func() bool { return len(e.leases(c)) == 0 })

	// down of a leased instance ends the lease through the daemon.
	l, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml")})
	if err != nil {
		t.Fatal(err)
	}
	e.mustRun("down", l.ID)
	if ls := e.leases(c); len(ls) != 0 {
		t.Errorf("down left the lease: %+v", ls)
	}

	_ = srv.Process.Signal(syscall.SIGTERM)
	if err := srv.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, log.String())
	}
	if _, err := os.Stat(filepath.Join(e.store, api.SocketName)); !os.IsNotExist(err) {
		t.Errorf("socket left after shutdown: %v", err)
	}
	ls := e.ls()
	if len(ls.Instances) != 1 || ls.Instances[0].ID != up.ID {
		t.Fatalf("after shutdown want only the up instance, got %+v", ls.Instances)
	}
	e.mustRun("down", up.ID)
	e.assertNothingLeft()
}

// After kill -9 of serve, gc removes its instances and a new serve starts
// on the stale socket; run without a daemon still works.
func TestServeKilled(t *testing.T) {
	e := newEnv(t)
	srv, _, c := e.startServe("-f", "dbfork.toml")
	if _, err := c.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml")}); err != nil {
		t.Fatal(err)
	}
	_ = srv.Process.Kill()
	_ = srv.Wait()
	if r := e.run("run", "--", "true"); r.code != 0 {
		t.Fatalf("run with a dead daemon's socket: %d %s", r.code, r.stderr)
	}
	e.mustRun("gc")
	e.assertNothingLeft()
	srv2, _, _ := e.startServe()
	_ = srv2.Process.Signal(syscall.SIGTERM)
	if err := srv2.Wait(); err != nil {
		t.Fatal(err)
	}
	e.assertNothingLeft()
}

func TestServeBadFlags(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--tcp", "0.0.0.0:7420"}, "loopback"},
		{[]string{"serve", "--tcp", "example.com:80"}, "loopback"},
		{[]string{"serve", "extra"}, "takes no arguments"},
		{[]string{"serve", "-f", "missing.toml"}, "missing.toml"},
	} {
		r := e.run(c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("%v: exit %d %q, want an error with %q", c.args, r.code, r.stderr, c.want)
		}
	}
	e.assertNothingLeft()
}

// `sudo dbfork serve` gives the socket to the invoking user, whose test
// runs then work without root: over 127.0.0.1, since the instance's own
// socket dir is private to the server user.
func TestServeForUnprivilegedClient(t *testing.T) {
	e := newEnv(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// A copy of dbfork the unprivileged user may execute.
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(e.root, "dbfork")
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	giveTo(t, nobody, e.proj, filepath.Join(e.proj, "dbfork.toml")) // the user's own project
	// Serving users other than root is an opt-in (issue 29).
	c := e.cmd("serve", "--allow-users", "-f", "dbfork.toml")
	c.Env = append(c.Env, "SUDO_UID="+nobody.Uid, "SUDO_GID="+nobody.Gid, "DBFORK_TEST_DAEMON_SECRET=hunter2")
	out := &syncBuf{}
	c.Stderr = out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Signal(syscall.SIGTERM); _ = c.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "listening on") })
	fi, err := os.Stat(filepath.Join(e.store, api.SocketName))
	if err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(uid) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v", fi, err)
	}
	run := exec.Command(pub, "--store", e.store, "run", "--", "sh", "-c", `psql -XAtc "select count(*) from items" && echo "host=$PGHOST" && echo "ran_as=$(psql -XAtc "select uid from ran_as")"`)
	run.Dir = e.proj
	run.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
	run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	got, err := run.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "3001") || !strings.Contains(string(got), "host=127.0.0.1") {
		t.Fatalf("run as nobody through serve: %v\n%s", err, got)
	}
	// The recipe's `run` step ran as the user behind sudo, not as root.
	if !strings.Contains(string(got), "ran_as="+nobody.Uid+"\n") {
		t.Fatalf("the recipe's command did not run as %s (uid %s):\n%s", nobody.Username, nobody.Uid, got)
	}
	// Issue 13 bug 3: `up` and `ls` work for that user through root's
	// daemon: all they need comes from the lease, not from root's records.
	asNobody := func(args ...string) (string, string, error) {
		c := exec.Command(pub, append([]string{"--store", e.store}, args...)...)
		c.Dir = e.proj
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		var so, se bytes.Buffer
		c.Stdout, c.Stderr = &so, &se
		err := c.Run()
		return so.String(), se.String(), err
	}
	stdout, stderr, err := asNobody("up", "--json")
	var up struct {
		ID, DSN  string
		Detached bool
	}
	if err != nil || json.Unmarshal([]byte(stdout), &up) != nil || up.DSN == "" || !up.Detached {
		t.Fatalf("up as nobody through serve: %v %q %q", err, stdout, stderr)
	}
	if out, err := exec.Command("psql", up.DSN, "-XAtc", "select count(*) from items").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "3001" {
		t.Fatalf("the instance up gave nobody: %v %s", err, out)
	}
	// A lease held by a running `dbfork run` of that user shows in their ls.
	held := exec.Command(pub, "--store", e.store, "run", "--", "sleep", "60")
	held.Dir = e.proj
	held.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
	held.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := held.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Process.Signal(syscall.SIGTERM); _ = held.Wait() }()
	// Issue 12 L4: root holds a lease too; nobody neither sees nor ends
	// it, and cannot name another user's process (pid 1) as a holder.
	ctx := context.Background()
	rootC, err := api.Dial(ctx, api.SocketPath(e.store))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := rootC.Acquire(ctx, api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml")})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rootC.Release(ctx, rl.ID) }()
	// H1: the daemon reads recipes and checks inputs with the caller's
	// rights: root's 0600 files neither load nor leak into errors.
	secret := filepath.Join(e.root, "secret.sql")
	if err := os.WriteFile(secret, []byte("select 'TOPSECRET';\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	steal := filepath.Join(e.proj, "steal.toml")
	if err := os.WriteFile(steal, []byte("engine = \"postgres\"\n[[load]]\nsql = \""+secret+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	giveTo(t, nobody, steal)
	// L7: a socket peer's run steps do not get the daemon's environment.
	envRecipe := filepath.Join(e.proj, "env.toml")
	if err := os.WriteFile(envRecipe, []byte("engine = \"postgres\"\n[[load]]\nrun = \"env > seen_env.txt\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	giveTo(t, nobody, envRecipe)
	probe := exec.Command("/usr/bin/python3", "-c", apiProbe, filepath.Join(e.store, api.SocketName), rl.ID, filepath.Join(e.proj, "dbfork.toml"), steal, envRecipe)
	probe.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	pout, err := probe.CombinedOutput()
	if err != nil {
		t.Fatalf("api probe as nobody: %v\n%s", err, pout)
	}
	seen, err := os.ReadFile(filepath.Join(e.proj, "seen_env.txt"))
	if err != nil {
		t.Fatalf("the env recipe's run step did not run: %v\n%s", err, pout)
	}
	if strings.Contains(string(seen), "hunter2") || !strings.Contains(string(seen), "PGPORT=") || !strings.Contains(string(seen), "HOME=") {
		t.Errorf("a socket peer's run step saw:\n%s", seen)
	}
	if strings.Contains(string(pout), "TOPSECRET") || strings.Contains(string(pout), "root:") {
		t.Errorf("an error shows a root-only file's content:\n%s", pout)
	}
	for _, want := range []string{"list 200 without-root-lease", "release 404", "pid1 400 lease holder pid 1 is not a process of yours",
		"shadow 404 recipe /etc/shadow cannot be read by uid " + nobody.Uid, "steal 400 input " + secret + " cannot be read by uid " + nobody.Uid} {
		if !strings.Contains(string(pout), want) {
			t.Errorf("api probe as nobody: want %q in:\n%s", want, pout)
		}
	}
	if ls, err := rootC.Leases(ctx); err != nil || len(ls) < 1 {
		t.Errorf("root's lease list: %v %v", ls, err)
	}
	var ls struct {
		Instances []struct{ ID, Status, DSN string }
	}
	waitFor(t, func() bool {
		stdout, stderr, err = asNobody("ls", "--json")
		if err != nil || json.Unmarshal([]byte(stdout), &ls) != nil {
			t.Fatalf("ls as nobody: %v %q %q", err, stdout, stderr)
		}
		return len(ls.Instances) == 1
	})
	if ls.Instances[0].Status != "leased" || ls.Instances[0].DSN == "" {
		t.Fatalf("ls as nobody: %+v", ls)
	}
	// The kept instance is root's record: ls says it cannot show it.
	if !strings.Contains(stderr, "not readable by you") {
		t.Fatalf("ls as nobody does not say what it cannot show: %q", stderr)
	}
	e.mustRun("down", up.ID)
}

// Under sudo, a recipe's `run` steps run as the user who typed the
// command (their tools, files and rights), not as root, whoever wrote the
// recipe (issue 29: no "root wrote this recipe" exception).
func TestSudoRunsRecipeCommandsAsInvoker(t *testing.T) {
	e := newEnv(t)
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("no user nobody: %v", err)
	}
	sudo := []string{"SUDO_UID=" + nobody.Uid, "SUDO_GID=" + nobody.Gid}
	ranAs := func(env []string, want string) {
		t.Helper()
		r := e.runEnv(env, "run", "--no-daemon", "--", "psql", "-XAtc", "select uid from ran_as")
		if r.code != 0 || strings.TrimSpace(r.stdout) != want {
			t.Fatalf("run step: exit %d, ran as %q, want %s; %s", r.code, r.stdout, want, r.stderr)
		}
	}
	ranAs(nil, "0") // root itself asked
	// A changed input rebuilds, as the user behind sudo: root wrote the
	// recipe, and that changes nothing.
	if err := os.WriteFile(filepath.Join(e.proj, "seed", "02.sql"), []byte("select 2;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ranAs(sudo, nobody.Uid)
	// The user's own project: the same.
	giveTo(t, nobody, e.proj, filepath.Join(e.proj, "dbfork.toml"))
	if err := os.WriteFile(filepath.Join(e.proj, "seed", "02.sql"), []byte("select 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ranAs(sudo, nobody.Uid)
	// A project the user behind sudo cannot enter: a clear error.
	other, err := user.Lookup("daemon")
	if err != nil {
		t.Fatalf("no user daemon: %v", err)
	}
	giveTo(t, other, e.proj, filepath.Join(e.proj, "dbfork.toml"))
	if err := os.Chmod(e.proj, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.proj, "seed", "03.sql"), []byte("select 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.runEnv(sudo, "build")
	if r.code == 0 || !strings.Contains(r.stderr, "cannot be read by uid "+nobody.Uid) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Fatalf("build of a project the caller cannot enter: exit %d %q", r.code, r.stderr)
	}
}

func giveTo(t *testing.T, u *user.User, paths ...string) {
	t.Helper()
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// serve killed with SIGKILL half-way through its SIGTERM shutdown
// (instances being torn down in parallel, a lease out): gc cleans up.
func TestServeKilledWhileStopping(t *testing.T) {
	e := newEnv(t)
	c := e.cmd("serve", "-f", "dbfork.toml")
	c.Env = append(c.Env, "DBFORK_CRASH_AT=serve:stopping")
	out := &syncBuf{}
	c.Stderr = out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	waitFor(t, func() bool { return strings.Contains(out.String(), "listening on") })
	cl, err := api.Dial(context.Background(), filepath.Join(e.store, api.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Acquire(context.Background(), api.AcquireRequest{Recipe: filepath.Join(e.proj, "dbfork.toml"), PID: os.Getpid()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		ps, err := cl.Pools(context.Background())
		return err == nil && len(ps) == 1 && ps[0].Ready >= 1
	})
	_ = c.Process.Signal(syscall.SIGTERM)
	err = c.Wait()
	ws, _ := c.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("serve was not killed while stopping: %v\n%s", err, out.String())
	}
	if len(e.ls().Instances) == 0 {
		t.Fatal("nothing was left to clean: the fault did not fire before a destroy")
	}
	e.mustRun("gc")
	e.assertNothingLeft()
	if r := e.run("run", "--", "psql", "-XAtc", "select count(*) from items"); r.code != 0 || strings.TrimSpace(r.stdout) != "3001" {
		t.Fatalf("run after crash+gc: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	e.assertNothingLeft()
}

// apiProbe calls the API over the unix socket (argv: socket, root's
// lease id, recipe) and prints what it got, one line per call.
const apiProbe = `
import json, socket, sys
sock, lid, recipe, steal, envr = sys.argv[1:6]
def call(method, path, body=None):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    data = json.dumps(body).encode() if body is not None else b""
    s.sendall(("%s %s HTTP/1.0\r\nHost: d\r\nContent-Length: %d\r\n\r\n" % (method, path, len(data))).encode() + data)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
    head, _, rest = out.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest.decode()
st, body = call("GET", "/v1/leases")
ids = [l["id"] for l in json.loads(body)["leases"]]
print("list", st, "with-root-lease" if lid in ids else "without-root-lease")
st, body = call("DELETE", "/v1/leases/" + lid)
print("release", st)
st, body = call("POST", "/v1/leases", {"recipe": recipe, "pid": 1})
print("pid1", st, json.loads(body).get("error"))
st, body = call("POST", "/v1/goldens", {"recipe": "/etc/shadow"})
print("shadow", st, json.loads(body).get("error"))
st, body = call("POST", "/v1/goldens", {"recipe": steal})
print("steal", st, json.loads(body).get("error"))
st, body = call("POST", "/v1/goldens", {"recipe": envr})
print("env", st, json.loads(body).get("error"))
`
