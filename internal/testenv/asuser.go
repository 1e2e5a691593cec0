package testenv

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Unprivileged ids the rootless tests run as (nobody:nogroup exists on
// every Debian machine and owns nothing of ours).
const (
	UserUID = 65534
	UserGID = 65534
)

// AsUserEnv is set in the environment of a test binary RunAsUser starts;
// tests that only make sense as that child skip without it.
const AsUserEnv = "DBFORK_TEST_AS_USER"

// UserDirs is, for the unprivileged half of a rootless test, the dirs
// its root half made ("host", "xfs", "btrfs"), or, for a developer who
// runs the test without root, only "host": a fresh dir of their own.
func UserDirs(t testing.TB) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	if v := os.Getenv(AsUserEnv); v != "" {
		if err := json.Unmarshal([]byte(v), &dirs); err != nil {
			t.Fatalf("%s: %v", AsUserEnv, err)
		}
		return dirs
	}
	dirs["host"] = Dir(t)
	return dirs
}

// UserDir is a fresh directory owned by the unprivileged test user.
func UserDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join(Dir(t), "user")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, UserUID, UserGID); err != nil {
		t.Fatal(err)
	}
	return d
}

// ChownToUser gives a directory (a loop filesystem's mount point) to the
// unprivileged test user.
func ChownToUser(t testing.TB, dir string) {
	t.Helper()
	if err := os.Chown(dir, UserUID, UserGID); err != nil {
		t.Fatal(err)
	}
}

// RunAsUser runs the tests matching run of this test binary again as the
// unprivileged user (setpriv: no capabilities, no supplementary groups),
// with HOME at a dir of its own and arg in AsUserEnv. It fails t when the
// child fails or skips anything, and returns the child's output.
func RunAsUser(t testing.TB, run, arg string, env ...string) string {
	t.Helper()
	RequireRoot(t)
	bin := filepath.Join(Dir(t), "test.bin")
	if err := copyExecutable(os.Args[0], bin); err != nil {
		t.Fatal(err)
	}
	home := UserDir(t)
	args := []string{"--reuid=" + itoa(UserUID), "--regid=" + itoa(UserGID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--", bin, "-test.run", run, "-test.v", "-test.count=1"}
	cmd := exec.Command("setpriv", args...)
	cmd.Dir = home
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C", AsUserEnv + "=" + arg}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tests %s as uid %d failed: %v\n%s", run, UserUID, err, out)
	}
	if strings.Contains(string(out), "--- SKIP") || strings.Contains(string(out), "no tests to run") {
		t.Fatalf("tests %s as uid %d skipped something:\n%s", run, UserUID, out)
	}
	return string(out)
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func itoa(n int) string { return strconv.Itoa(n) }

// AssertNoMountsAnywhere fails t if any process's mount namespace still
// has something mounted at or below dir (rootless clones live in
// namespaces of their own, invisible to this process's mount table).
func AssertNoMountsAnywhere(t testing.TB, dir string) {
	t.Helper()
	for _, m := range MountsInAnyNamespace(dir) {
		t.Errorf("still mounted in a namespace: %s", m)
	}
}

// MountsInAnyNamespace lists "PID: mount point" for every mount strictly
// below dir seen in /proc/PID/mountinfo of any process.
func MountsInAnyNamespace(dir string) []string {
	var out []string
	seen := map[string]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		ns, _ := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt"))
		if ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "mountinfo"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && strings.HasPrefix(f[4], dir+"/") && !storeBind(f) {
				out = append(out, e.Name()+": "+f[4])
			}
		}
	}
	return out
}

// storeBind says whether a mountinfo line is a plain store's nosuid,nodev
// bind mount of itself (store/nosuid.go): the store's own, made by the
// test's store.Open as root and removed with the test's dir, not a
// leftover clone.
func storeBind(f []string) bool {
	root, point, opts := f[3], f[4], ","+f[5]+","
	return root != "/" && strings.HasSuffix(point, root) && strings.Contains(opts, ",nosuid,") && strings.Contains(opts, ",nodev,")
}
