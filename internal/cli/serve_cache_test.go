package cli_test

import (
	"net/http"
	"net/http/httptest"
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
	"github.com/dbfork/dbfork/internal/cli"
)

// authSink is an HTTP server that wants Basic credentials and records the
// Authorization headers it is sent.
type authSink struct {
	mu       sync.Mutex
	requests int
	auth     []string
}

func (s *authSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	if a := r.Header.Get("Authorization"); a != "" {
		s.auth = append(s.auth, a)
	}
	s.mu.Unlock()
	w.Header().Set("WWW-Authenticate", `Basic realm="sink"`)
	w.WriteHeader(http.StatusUnauthorized)
}

// A root daemon whose environment holds registry credentials (named for
// a host) never sends them for a socket peer's [cache] naming that host:
// the peer's build pulls anonymously (and builds, with a warning).
func TestServeKeepsItsRegistryCredentialsFromPeers(t *testing.T) {
	e := newEnv(t)
	sink := &authSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	recipe := filepath.Join(e.proj, "dbfork.toml")
	f, err := os.OpenFile(recipe, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("\n[cache]\nfrom = \"" + host + "/goldens/shop\"\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(e.root, "dbfork")
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	giveTo(t, nobody, e.proj, recipe)
	c := e.cmd("serve", "--allow-users")
	c.Env = append(c.Env, "SUDO_UID="+nobody.Uid, "SUDO_GID="+nobody.Gid,
		cli.RegistryUserEnv+"=ci-bot", cli.RegistryPasswordEnv+"=SECRET_TOKEN", cli.RegistryHostEnv+"="+host)
	out := &syncBuf{}
	c.Stderr = out
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Process.Signal(syscall.SIGTERM); _ = c.Wait() }()
	waitFor(t, func() bool { return strings.Contains(out.String(), "listening on") })
	if _, err := os.Stat(filepath.Join(e.store, api.SocketName)); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(pub, "--store", e.store, "run", "--", "true")
	run.Dir = e.proj
	run.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
	run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if got, err := run.CombinedOutput(); err != nil {
		t.Fatalf("run as nobody through serve: %v\n%s\n%s", err, got, out.String())
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.requests == 0 {
		t.Fatalf("the peer's [cache] was never asked (daemon log:\n%s)", out.String())
	}
	if len(sink.auth) > 0 {
		t.Errorf("the daemon sent its credentials for a peer's [cache]: %q", sink.auth)
	}
}
