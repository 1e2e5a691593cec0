package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/testenv"
)

// Issue 18, as its reporter will check it: an ordinary user (no sudo, no
// capabilities) with the default store in their ext4 home gets OverlayFS
// clones mounted in the server's own namespaces; build, up, run, down and
// gc work; kill -9 of the server or of dbfork leaves no mount in any
// namespace and no process once gc ran.
func TestRootlessUser(t *testing.T) {
	u := newUserWorld(t)
	storeDir, as, must, clean := u.store, u.cmd, u.must, u.waitClean

	doc := must("doctor")
	for _, want := range []string{"ok    userns-overlay", "auto picks userns-overlay", "first-write trap"} {
		if !strings.Contains(doc, want) {
			t.Errorf("doctor as a user lacks %q:\n%s", want, doc)
		}
	}
	if key := strings.TrimSpace(must("build")); len(key) != 64 {
		t.Fatalf("build printed %q", key)
	}
	var up struct {
		ID, Backend, Dir string
		PID              int
		Trap             bool `json:"whole_file_copy_up"`
	}
	if err := json.Unmarshal([]byte(must("up", "--json")), &up); err != nil {
		t.Fatal(err)
	}
	if up.Backend != "userns-overlay" || !up.Trap || !strings.HasPrefix(up.Dir, storeDir+"/") {
		t.Fatalf("up --json as a user: %+v (store %s)", up, storeDir)
	}
	if m := testenv.MountsInAnyNamespace(up.Dir); len(m) != 1 {
		t.Fatalf("want the clone mounted in one namespace (the server's), got %v", m)
	}
	if text := must("up"); !strings.Contains(text, "# first-write trap") {
		t.Errorf("up does not say the first-write trap:\n%s", text)
	}
	out := must("run", "--", "psql", "-XAtc", "select count(*) from items")
	if strings.TrimSpace(out) != "3001" {
		t.Fatalf("run -- psql as a user: %q", out)
	}
	must("down", up.ID)
	must("down", "--all")
	clean("after down")

	// The daemon a test runner starts runs as the user too.
	must("daemon", "start", "--json")
	if out := must("run", "--", "psql", "-XAtc", "select count(*) from items"); strings.TrimSpace(out) != "3001" {
		t.Fatalf("run through the user's daemon: %q", out)
	}
	must("daemon", "stop")
	clean("after daemon stop")

	// kill -9 of the server: its namespace and mount die with it.
	if err := json.Unmarshal([]byte(must("up", "--json")), &up); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(up.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	clean("after kill -9 of the server")
	if gc := must("gc"); !strings.Contains(gc, up.ID) {
		t.Errorf("gc did not reap the killed instance %s: %s", up.ID, gc)
	}

	// kill -9 of dbfork run: its server lives on until gc.
	c := as("run", "--", "sh", "-c", "echo started; exec sleep 60")
	var so bytes.Buffer
	c.Stdout = &so
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(so.String(), "started") })
	_ = c.Process.Kill()
	_ = c.Wait()
	must("gc")
	clean("after kill -9 of dbfork run and gc")
	if ids, _ := os.ReadDir(filepath.Join(storeDir, "instances")); len(ids) != 0 {
		t.Errorf("instances left: %d", len(ids))
	}
}

// userWorld is an ordinary user's world: their own copy of dbfork, a
// project in their home and the default store there.
type userWorld struct {
	t                      *testing.T
	home, proj, store, pub string
}

func newUserWorld(t *testing.T) *userWorld {
	testenv.RequireRoot(t)
	home := testenv.UserDir(t)
	u := &userWorld{t: t, home: home, proj: filepath.Join(home, "proj"), store: filepath.Join(home, ".local", "share", "dbfork"),
		pub: filepath.Join(filepath.Dir(home), "dbfork")}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	testenv.ShopRecipe(t, u.proj, 3000)
	chownTree(t, u.proj)
	t.Cleanup(func() { _ = u.cmd("gc", "--all").Run() })
	return u
}

// cmd runs dbfork as the user, in their project, with a minimal env.
func (u *userWorld) cmd(args ...string) *exec.Cmd {
	c := exec.Command(u.pub, args...)
	c.Dir = u.proj
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.home, "LANG=C"}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	return c
}

func (u *userWorld) must(args ...string) string {
	u.t.Helper()
	var so, se bytes.Buffer
	c := u.cmd(args...)
	c.Stdout, c.Stderr = &so, &se
	if err := c.Run(); err != nil {
		u.t.Fatalf("dbfork %s as uid %d: %v\n%s%s", strings.Join(args, " "), testenv.UserUID, err, so.String(), se.String())
	}
	return so.String()
}

// waitClean waits until no server runs on the user's store and nothing is
// mounted under it in any namespace.
func (u *userWorld) waitClean(when string) {
	u.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(testenv.ServersUnder(u.store)) > 0 || len(testenv.MountsInAnyNamespace(u.store)) > 0 {
		if time.Now().After(deadline) {
			u.t.Fatalf("%s: processes %v, mounts %v", when, testenv.ServersUnder(u.store), testenv.MountsInAnyNamespace(u.store))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A store that root made is refused to a user with one line that says what to
// do (goldens are private to the store's owner by design).
func TestRootStoreRefusedToUser(t *testing.T) {
	e := newEnv(t)
	e.mustRun("build")
	pub := filepath.Join(e.root, "dbfork-pub")
	b, _ := os.ReadFile(bin)
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"build"}, {"up"}} {
		c := exec.Command(pub, append([]string{"--store", e.store}, args...)...)
		c.Dir = e.proj
		c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent"}
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
		var se bytes.Buffer
		c.Stderr = &se
		err := c.Run()
		msg := strings.TrimSpace(se.String())
		if err == nil || strings.Contains(msg, "\n") || !strings.Contains(msg, "belongs to uid 0") || !strings.Contains(msg, "dbfork serve") {
			t.Errorf("%v as a user on root's store: %v %q", args, err, msg)
		}
	}
}

func chownTree(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err == nil {
			err = os.Lchown(p, testenv.UserUID, testenv.UserGID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// doctor says, in one line, what a store on tmpfs means.
func TestDoctorStoreOnTmpfs(t *testing.T) {
	testenv.RequireRoot(t)
	dir := filepath.Join(testenv.Dir(t), "tmpfs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=64m,mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })
	testenv.ChownToUser(t, dir)
	pub := filepath.Join(filepath.Dir(dir), "dbfork")
	b, _ := os.ReadFile(bin)
	if err := os.WriteFile(pub, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(pub, "--store", filepath.Join(dir, "store"), "doctor")
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	out, err := c.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "the store is on tmpfs: goldens live in memory") {
		t.Fatalf("doctor on tmpfs as a user: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
