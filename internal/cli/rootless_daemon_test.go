package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// The daemon a test run starts works for a user without root: a pooled
// userns-overlay instance has its [pool] hot table copied up through the
// server's own namespace before it is leased, a reset brings the golden's
// rows back on the same DSN (a new namespace), and `daemon stop` leaves
// no mount and no process.
func TestRootlessDaemon(t *testing.T) {
	u := newUserWorld(t)
	rf := filepath.Join(u.proj, "dbfork.toml")
	f, err := os.OpenFile(rf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "\n[pool]\nprewarm = true\nhot = [\"items\"]\n")
	f.Close()
	var d struct{ Socket string }
	if err := json.Unmarshal([]byte(u.must("daemon", "start", "--json")), &d); err != nil || d.Socket == "" {
		t.Fatalf("daemon start as a user: %v", err)
	}
	defer func() { _ = u.cmd("daemon", "stop").Run() }()
	holder := exec.Command("sleep", "300")
	holder.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Process.Kill(); _ = holder.Wait() }()
	api := func(path, body string) map[string]any {
		t.Helper()
		// A plain HTTP/1.0 POST over the unix socket, sent by a process of
		// the user (the daemon scopes leases to the peer's uid).
		c := exec.Command("/usr/bin/python3", "-c", postOverUnixSocket, d.Socket, path, body)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
		out, err := c.Output()
		var m map[string]any
		if err != nil || json.Unmarshal(out, &m) != nil || m["error"] != nil {
			t.Fatalf("POST %s as the user: %v %s", path, err, out)
		}
		return m
	}
	lease := api("/v1/leases", fmt.Sprintf(`{"recipe": %q, "pid": %d}`, rf, holder.Process.Pid))
	id, dsn := lease["id"].(string), lease["dsn"].(string)
	if lease["backend"] != "userns-overlay" {
		t.Fatalf("lease from a user's daemon: backend %v", lease["backend"])
	}
	if out := u.must("inspect", "--top", "0", id); !strings.Contains(out, " items") {
		t.Fatalf("the hot table was not copied up before the lease:\n%s", out)
	}
	psql := func(sql string) string {
		t.Helper()
		out, err := exec.Command("psql", dsn, "-XAtc", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("psql %q: %v %s", sql, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := psql("insert into items(name) values ('x'); select count(*) from items"); !strings.HasSuffix(got, "3002") {
		t.Fatalf("write: %q", got)
	}
	// The second reset uses the clone made ahead after the first (a
	// namespaced clone: its scratch dir goes with it).
	for i := 1; i <= 2; i++ {
		r := api("/v1/leases/"+id+"/reset", "{}")
		if r["dsn"] != dsn {
			t.Fatalf("reset %d changed the DSN: %v, was %s", i, r["dsn"], dsn)
		}
		steps, _ := r["reset_steps_ms"].(map[string]any)
		if _, ahead := steps["wait for the clone made ahead"]; ahead != (i == 2) {
			t.Errorf("reset %d steps %v", i, steps)
		}
		if got := psql("select count(*) from items"); got != "3001" {
			t.Fatalf("after reset %d: %s rows, want the golden's 3001", i, got)
		}
		psql("insert into items(name) values ('y')")
	}
	u.must("daemon", "stop")
	u.waitClean("after daemon stop")
}

// postOverUnixSocket: argv socket, path, body; prints the response body.
const postOverUnixSocket = `import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
b = sys.argv[3].encode()
s.sendall(b"POST " + sys.argv[2].encode() + b" HTTP/1.0\r\nHost: dbfork\r\nContent-Type: application/json\r\nContent-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b)
r = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    r += d
sys.stdout.write(r.split(b"\r\n\r\n", 1)[1].decode())
`
