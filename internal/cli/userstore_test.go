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

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/testenv"
)

// A user store as issue 29 asks for it: root sets it up once for the
// unprivileged test user (nobody, HOME=/nonexistent) under a test-only
// base dir and fstab; the user then builds and clones on it with reflink,
// with no --store and no DBFORK_STORE.
type userStoreWorld struct {
	t                      *testing.T
	dir, base, fstab, root string
	img, proj, before, pub string
}

const otherFstabLine = "/dev/sdz9 /srv/elsewhere ext4 defaults 0 2"

func newUserStoreWorld(t *testing.T, base string) *userStoreWorld {
	testenv.RequireRoot(t)
	dir := testenv.Dir(t)
	if base == "" {
		base = filepath.Join(dir, "users")
	}
	w := &userStoreWorld{t: t, dir: dir, base: base, fstab: filepath.Join(dir, "fstab"),
		root: filepath.Join(base, "nobody"), img: filepath.Join(base, "nobody.img"), proj: filepath.Join(dir, "proj")}
	w.before = "# the machine's own entries stay as they are\n" + otherFstabLine + "\n"
	if err := os.WriteFile(w.fstab, []byte(w.before), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.ShopRecipe(t, w.proj, 3000)
	chownTree(t, w.proj)
	// The user runs a copy of the binary they can reach (bin's dir is 0700).
	w.pub = filepath.Join(dir, "dbfork")
	if b, err := os.ReadFile(bin); err != nil || os.WriteFile(w.pub, b, 0o755) != nil {
		t.Fatalf("copy %s: %v", bin, err)
	}
	return w
}

// asRoot runs dbfork as root with the test's base dir and fstab.
func (w *userStoreWorld) asRoot(args ...string) result {
	w.t.Helper()
	return w.asRootEnv(nil, args...)
}

func (w *userStoreWorld) asRootEnv(env []string, args ...string) result {
	w.t.Helper()
	args = append(args, "--fstab", w.fstab)
	c := exec.Command(bin, args...)
	c.Dir = w.dir
	c.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/root", "DBFORK_USER_STORES=" + w.base}, env...)
	return runCmd(w.t, c)
}

// asUser runs dbfork as nobody, whose home does not exist, with nothing
// configured but where user stores live.
func (w *userStoreWorld) asUser(args ...string) result {
	w.t.Helper()
	c := exec.Command(w.pub, args...)
	c.Dir = w.proj
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C", "DBFORK_USER_STORES=" + w.base}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	return runCmd(w.t, c)
}

func runCmd(t *testing.T, c *exec.Cmd) result {
	t.Helper()
	var so, se bytes.Buffer
	c.Stdout, c.Stderr = &so, &se
	err := c.Run()
	r := result{stdout: so.String(), stderr: se.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func (w *userStoreWorld) must(r result, what string) string {
	w.t.Helper()
	if r.code != 0 {
		w.t.Fatalf("%s: exit %d\n%s%s", what, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// oneLine fails t unless r failed with exit code and one stderr line
// holding want.
func oneLineErr(t *testing.T, r result, code int, want string) {
	t.Helper()
	msg := strings.TrimSpace(r.stderr)
	if r.code != code || strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
		t.Errorf("want exit %d and one line with %q, got exit %d: %q", code, want, r.code, msg)
	}
}

// mountInfoOptions is the per-mount options field of dir's line in
// /proc/self/mountinfo, "" when dir is not a mount point.
func mountInfoOptions(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	opts := ""
	for _, ln := range strings.Split(string(data), "\n") {
		if f := strings.Fields(ln); len(f) > 5 && f[4] == dir {
			opts = f[5]
		}
	}
	return opts
}

// loopsBackedBy lists loop devices whose backing file is img.
func loopsBackedBy(img string) []string {
	var out []string
	files, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.TrimSpace(string(b)) == img {
			out = append(out, f)
		}
	}
	return out
}

func TestUserStore(t *testing.T) {
	w := newUserStoreWorld(t, "")
	// Plain `sudo dbfork store init`: the user behind sudo.
	sudo := []string{"SUDO_UID=65534", "SUDO_GID=65534", "SUDO_USER=nobody"}
	out := w.must(w.asRootEnv(sudo, "store", "init", "--size", "2G"), "sudo dbfork store init (for nobody)")
	if !strings.Contains(out, w.root) {
		t.Errorf("init does not name the store %s: %q", w.root, out)
	}
	t.Cleanup(func() { _ = unix.Unmount(w.root, 0) }) // on failure: before testenv.Dir removes things

	// nosuid,nodev, read from the kernel's own table.
	opts := mountInfoOptions(t, w.root)
	for _, want := range []string{"nosuid", "nodev"} {
		if !strings.Contains(","+opts+",", ","+want+",") {
			t.Errorf("%s mounted with %q, lacks %s", w.root, opts, want)
		}
	}
	// The filesystem's root is the user's, 0700; the image root's, 0600.
	assertOwnerMode(t, w.root, testenv.UserUID, 0o700)
	assertOwnerMode(t, w.img, 0, 0o600)
	// Every dir above the mount point is root's, and none but sticky ones
	// above the base can be written by others.
	for d := w.base; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		writable := fi.Mode().Perm()&0o022 != 0 && !(d != w.base && fi.Mode()&os.ModeSticky != 0)
		if fi.Mode()&os.ModeSymlink != 0 || st.Uid != 0 || writable {
			t.Errorf("%s above the store: %v uid %d", d, fi.Mode(), st.Uid)
		}
		if d == "/" {
			break
		}
	}
	entry := w.img + " " + w.root + " xfs loop,nosuid,nodev,discard,nofail 0 0"
	fstab := readFile(t, w.fstab)
	if !strings.HasPrefix(fstab, w.before) || !strings.Contains(fstab, "\n"+entry+"\n") || !strings.Contains(fstab, "# dbfork: copy-on-write store of user nobody") {
		t.Errorf("fstab after init:\n%s", fstab)
	}

	// A second init changes nothing and says so.
	oneLineErr(t, w.asRoot("store", "init", "--user", "nobody", "--size", "2G"), 5, "already exists")
	if got := readFile(t, w.fstab); got != fstab {
		t.Errorf("second init changed the fstab:\n%s", got)
	}
	if n := len(loopsBackedBy(w.img)); n != 1 {
		t.Errorf("after a second init %d loop devices back the image, want 1", n)
	}

	// The user builds and clones on it without configuration, by reflink.
	w.must(w.asUser("build"), "build as the user")
	var up struct{ ID, Backend, Dir string }
	if err := json.Unmarshal([]byte(w.must(w.asUser("up", "--json"), "up as the user")), &up); err != nil {
		t.Fatal(err)
	}
	if up.Backend != "reflink" || !strings.HasPrefix(up.Dir, w.root+"/") {
		t.Errorf("up as the user: backend %s in %s, want reflink in %s", up.Backend, up.Dir, w.root)
	}
	if n := w.must(w.asUser("run", "--", "psql", "-XAtc", "select count(*) from items"), "run as the user"); strings.TrimSpace(n) != "3001" {
		t.Errorf("run -- psql as the user: %q", n)
	}
	var doc struct {
		Store struct{ Path string }
		Auto  struct{ Backend string }
	}
	if err := json.Unmarshal([]byte(w.must(w.asUser("doctor", "--json"), "doctor as the user")), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Store.Path != w.root || doc.Auto.Backend != "reflink" {
		t.Errorf("doctor as the user: store %s auto %s", doc.Store.Path, doc.Auto.Backend)
	}

	// Removal is refused while an instance or the daemon holds the store.
	oneLineErr(t, w.asRoot("store", "rm", "--user", "nobody"), 5, "in use")
	w.must(w.asUser("down", "--all"), "down --all")
	// What every test-runner client runs to find the daemon (docs/api.md)
	// names the user's store.
	var d struct{ Socket, Store string }
	if err := json.Unmarshal([]byte(w.must(w.asUser("daemon", "start", "--json"), "daemon start")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Store != w.root || d.Socket != filepath.Join(w.root, "dbfork.sock") {
		t.Errorf("daemon start --json as the user: %+v, want the store %s", d, w.root)
	}
	oneLineErr(t, w.asRoot("store", "rm", "--user", "nobody"), 5, "in use")
	w.must(w.asUser("daemon", "stop"), "daemon stop")

	// After a boot that did not mount it: one line naming the command;
	// then the fstab entry mounts it as a boot would, golden and all.
	if err := unix.Unmount(w.root, 0); err != nil {
		t.Fatal(err)
	}
	oneLineErr(t, w.asUser("build"), 4, "sudo dbfork store mount --user nobody")
	if out, err := exec.Command("mount", "--fstab", w.fstab, w.root).CombinedOutput(); err != nil {
		t.Fatalf("mount by the fstab entry: %v: %s", err, out)
	}
	assertOwnerMode(t, w.root, testenv.UserUID, 0o700)
	if n := w.must(w.asUser("run", "--", "psql", "-XAtc", "select count(*) from items"), "run after the remount"); strings.TrimSpace(n) != "3001" {
		t.Errorf("run after the remount: %q", n)
	}
	// The command the line names does the same, and writes a lost fstab
	// entry again.
	if err := unix.Unmount(w.root, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.fstab, []byte(w.before), 0o644); err != nil {
		t.Fatal(err)
	}
	w.must(w.asRoot("store", "mount", "--user", "nobody"), "store mount --user nobody")
	if opts := mountInfoOptions(t, w.root); !strings.Contains(opts, "nosuid") || readFile(t, w.fstab) != fstab {
		t.Errorf("after store mount --user: options %q, fstab:\n%s", opts, readFile(t, w.fstab))
	}
	w.must(w.asUser("ls"), "ls after store mount --user")

	w.must(w.asRoot("store", "rm", "--user", "nobody"), "store rm --user nobody")
	if opts := mountInfoOptions(t, w.root); opts != "" {
		t.Errorf("%s still mounted after rm (%s)", w.root, opts)
	}
	if l := loopsBackedBy(w.img); len(l) > 0 {
		t.Errorf("loop devices still back %s: %v", w.img, l)
	}
	for _, p := range []string{w.img, w.root} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left after rm", p)
		}
	}
	if got := readFile(t, w.fstab); got != w.before {
		t.Errorf("fstab after rm:\n%s\nwant:\n%s", got, w.before)
	}
	// The user is back on their default store without one.
	oneLineErr(t, w.asRoot("store", "rm", "--user", "nobody"), 3, "has no store")
}

func assertOwnerMode(t *testing.T, path string, uid uint32, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || fi.Mode().Perm() != mode {
		t.Errorf("%s: uid %d mode %v, want uid %d mode %v", path, st.Uid, fi.Mode().Perm(), uid, mode)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Root mounts a user store only at a path no one else can change: a user
// who could write a dir on the way could swap the mount point for a
// symlink (or their own dir) before init or the next boot's mount.
func TestUserStoreInitRefusals(t *testing.T) {
	w := newUserStoreWorld(t, "")
	userDir := testenv.UserDir(t) // somewhere the user owns
	mkdir := func(p string, mode os.FileMode) string {
		t.Helper()
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	asUserDo := func(args ...string) {
		t.Helper()
		c := exec.Command(args[0], args[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("%v as the user: %v: %s", args, err, out)
		}
	}
	open := mkdir(filepath.Join(w.dir, "open"), 0o777)
	sticky := mkdir(filepath.Join(w.dir, "sticky"), os.ModeSticky|0o777)
	rootBase := mkdir(filepath.Join(w.dir, "rootbase"), 0o755)
	// The user plants a symlink and a dir of their own in the sticky dir,
	// as they could in /tmp before root's first init there.
	asUserDo("ln", "-s", userDir, filepath.Join(sticky, "linked"))
	asUserDo("mkdir", filepath.Join(sticky, "planted"), filepath.Join(sticky, "planted", "nobody"))
	// A mount point that is a symlink (root's base, so planted by whoever
	// had root: still refused), and one that is a plain file.
	if err := os.Symlink(userDir, filepath.Join(rootBase, "nobody")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, base, user string
		code             int
		want             string
	}{
		{"no such user", w.base, "no-such-user-29", 3, `no user "no-such-user-29"`},
		{"root", w.base, "root", 2, "root needs no user store"},
		{"bad name", w.base, "../etc", 2, "cannot name a store"},
		{"user-writable parent", filepath.Join(open, "users"), "nobody", 2, "writable by group or others"},
		{"symlinked base", filepath.Join(sticky, "linked"), "nobody", 2, "is a symlink"},
		{"base the user made", filepath.Join(sticky, "planted"), "nobody", 2, "belongs to uid 65534"},
		{"symlinked mount point", rootBase, "nobody", 2, "is a symlink"},
	}
	for _, c := range cases {
		w.base = c.base
		r := w.asRoot("store", "init", "--user", c.user, "--size", "1G")
		t.Run(c.name, func(t *testing.T) { oneLineErr(t, r, c.code, c.want) })
	}
	// Nothing was made anywhere: no image, no mount, no fstab line.
	if got := readFile(t, w.fstab); got != w.before {
		t.Errorf("fstab after refusals:\n%s", got)
	}
	for _, d := range []string{open, sticky, rootBase, userDir} {
		if m, _ := filepath.Glob(filepath.Join(d, "*", "*.img")); len(m) > 0 {
			t.Errorf("images made: %v", m)
		}
		if m, _ := filepath.Glob(filepath.Join(d, "*.img")); len(m) > 0 {
			t.Errorf("images made: %v", m)
		}
	}
	if m := testenv.MountsInAnyNamespace(w.dir); len(m) > 0 {
		t.Errorf("mounts made: %v", m)
	}
}

// doctor, as a user whose store cannot share extents, names the one
// command that gives them one that can.
func TestDoctorNamesUserStoreInit(t *testing.T) {
	w := newUserStoreWorld(t, "")
	home := testenv.UserDir(t)
	c := exec.Command(w.pub, "doctor")
	c.Dir = w.proj
	c.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LANG=C", "DBFORK_USER_STORES=" + w.base}
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: testenv.UserUID, Gid: testenv.UserGID}}
	out := w.must(runCmd(t, c), "doctor as the user")
	if !strings.Contains(out, "sudo dbfork store init --user nobody") {
		t.Errorf("doctor on an ext4 store as a user does not name `sudo dbfork store init --user nobody`:\n%s", out)
	}
}

// A user's dbfork takes a user store only where root made it: a planted
// image in a dir others can write, or an image that is not root's, is
// refused in one line rather than used or silently skipped.
func TestUserStoreFoundOnlyWhereRootMadeIt(t *testing.T) {
	w := newUserStoreWorld(t, "")
	open := filepath.Join(w.dir, "open")
	if err := os.Mkdir(open, 0o755); err != nil || os.Chmod(open, 0o777) != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(w.dir, "planted")
	if err := os.Mkdir(planted, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{filepath.Join(open, "nobody.img"), filepath.Join(planted, "nobody.img")} {
		if err := os.WriteFile(img, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(planted, "nobody.img"), 12345, 12345); err != nil {
		t.Fatal(err)
	}
	for base, want := range map[string]string{open: "writable by group or others", planted: "not a file of root's alone"} {
		w.base = base
		oneLineErr(t, w.asUser("ls"), 2, want)
	}
}
