package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 29 (the lows): an instance a user made with `up` through root's
// daemon is theirs: they can reset it and take it down (the daemon does it
// for them; its record is root's), while another user's kept instance
// (here root's) stays out of their reach. GET /v1/pools shows the user
// only the pools they leased from.
func TestDownAndResetOwnUpThroughDaemon(t *testing.T) {
	e := newEnv(t)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(e.root, "dbfork") // a copy the user may execute
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{e.proj, filepath.Join(e.proj, "dbfork.toml")} {
		if err := os.Chown(p, testenv.UserUID, testenv.UserGID); err != nil {
			t.Fatal(err)
		}
	}
	// A root daemon serves root only unless told otherwise; with
	// --allow-users the socket is the user's (serve under sudo).
	serveArgs := []string{"serve", "--allow-users", "-f", "dbfork.toml"}
	srv := e.cmd(serveArgs...)
	srv.Env = append(srv.Env, "SUDO_UID="+strconv.Itoa(testenv.UserUID), "SUDO_GID="+strconv.Itoa(testenv.UserGID))
	out := &syncBuf{}
	srv.Stderr = out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "listening on") })
	asUser := func(name string, args ...string) result {
		c := exec.Command(name, args...)
		c.Dir = e.proj
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
		var so, se bytes.Buffer
		c.Stdout, c.Stderr = &so, &se
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return result{code, so.String(), se.String()}
	}
	dbfork := func(args ...string) result { return asUser(pub, append([]string{"--store", e.store}, args...)...) }
	userPools := func() []api.PoolInfo {
		t.Helper()
		// A plain HTTP/1.0 request on the daemon's socket, from a
		// process of the user's (the daemon goes by the peer's uid).
		r := asUser("/usr/bin/python3", "-c", getOnSocket, filepath.Join(e.store, api.SocketName), "/v1/pools")
		var got struct{ Pools []api.PoolInfo }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil {
			t.Fatalf("GET /v1/pools as uid %d: %+v", testenv.UserUID, r)
		}
		return got.Pools
	}
	var up struct{ ID, DSN string }
	// Root's own `up` through the daemon: another user's kept instance.
	if err := json.Unmarshal([]byte(e.mustRun("up", "--json").stdout), &up); err != nil || up.ID == "" {
		t.Fatalf("root's up: %v", err)
	}
	rootsID := up.ID
	defer e.run("down", rootsID)
	if ps := userPools(); len(ps) != 0 {
		t.Errorf("uid %d sees root's pool before leasing from it: %+v", testenv.UserUID, ps)
	}
	r := dbfork("up", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &up) != nil || up.DSN == "" {
		t.Fatalf("up as uid %d through root's daemon: %+v", testenv.UserUID, r)
	}
	mine := up.ID
	defer e.run("down", mine)
	if ps := userPools(); len(ps) != 1 || ps[0].Recipe != filepath.Join(e.proj, "dbfork.toml") {
		t.Errorf("uid %d's pools after its up: %+v", testenv.UserUID, ps)
	}
	psql := func(sql string) (string, error) {
		o, err := exec.Command("psql", up.DSN, "-XAtc", sql).CombinedOutput()
		return strings.TrimSpace(string(o)), err
	}
	if o, err := psql("create table scratch(x int)"); err != nil {
		t.Fatalf("write to the instance: %v %s", err, o)
	}
	if r := dbfork("reset", mine); r.code != 0 {
		t.Fatalf("reset of its own instance as uid %d: %+v", testenv.UserUID, r)
	}
	if o, err := psql("select to_regclass('scratch') is null"); err != nil || o != "t" {
		t.Errorf("after reset, same DSN: %q %v; want the golden's data", o, err)
	}
	// Root's kept instance: neither reset nor taken down by the user.
	for _, cmd := range []string{"reset", "down"} {
		if r := dbfork(cmd, rootsID); r.code == 0 || !strings.Contains(r.stderr, "no instance "+rootsID+" kept through this daemon by you") {
			t.Errorf("%s of root's instance as uid %d: %+v; want it refused as not theirs", cmd, testenv.UserUID, r)
		}
	}
	if !lsHas(t, e, rootsID) {
		t.Fatalf("root's instance %s is gone after the user's attempts", rootsID)
	}
	if r := dbfork("down", mine); r.code != 0 || !strings.Contains(r.stdout, "removed "+mine) {
		t.Fatalf("down of its own instance as uid %d: %+v", testenv.UserUID, r)
	}
	if lsHas(t, e, mine) {
		t.Errorf("instance %s still listed after its owner's down", mine)
	}
}

func lsHas(t *testing.T, e *env, id string) bool {
	t.Helper()
	var ls lsOut
	if err := json.Unmarshal([]byte(e.mustRun("ls", "--json").stdout), &ls); err != nil {
		t.Fatal(err)
	}
	for _, in := range ls.Instances {
		if in.ID == id {
			return true
		}
	}
	return false
}

// getOnSocket sends GET argv[2] over the unix socket argv[1] and prints the
// response body; it exits 1 unless the status is 200.
const getOnSocket = `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET " + sys.argv[2].encode() + b" HTTP/1.0\r\n\r\n")
raw = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    raw += b
head, _, body = raw.partition(b"\r\n\r\n")
sys.stdout.write(body.decode())
sys.exit(0 if head.split(b" ")[1] == b"200" else 1)
`
