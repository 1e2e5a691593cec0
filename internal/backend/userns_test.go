package backend_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Each way a kernel can forbid unprivileged user namespaces is named,
// with the setting that allows it.
func TestUsernsBlockedSays(t *testing.T) {
	cases := map[string]struct{ file, value, want string }{
		"max":      {"user/max_user_namespaces", "0", "sysctl -w user.max_user_namespaces="},
		"debian":   {"kernel/unprivileged_userns_clone", "0", "sysctl -w kernel.unprivileged_userns_clone=1"},
		"apparmor": {"kernel/apparmor_restrict_unprivileged_userns", "1", "AppArmor profile with `userns,`"},
		"allowed":  {"user/max_user_namespaces", "15000", ""},
	}
	for name, c := range cases {
		dir := t.TempDir()
		p := filepath.Join(dir, c.file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c.value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got := backend.UsernsBlocked(dir)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%s: %q, want one line containing %q", name, got, c.want)
		}
	}
	if got := backend.UsernsBlocked(t.TempDir()); got != "" {
		t.Errorf("no sysctls at all: %q", got)
	}
}

// With user namespaces really disabled (user.max_user_namespaces = 0, set
// inside a user namespace of this test's own so the machine is not
// touched), the rootless probe fails with the one line that says so.
func TestUsernsOverlayProbeWhenDisabled(t *testing.T) {
	if dir := os.Getenv("DBFORK_TEST_PROBE_DIR"); dir != "" {
		probeWithUsernsDisabled(t, dir)
		return
	}
	testenv.RequireRoot(t)
	dir := testenv.UserDir(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestUsernsOverlayProbeWhenDisabled$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "DBFORK_TEST_PROBE_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 syscall.CLONE_NEWUSER,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: testenv.UserUID, HostID: testenv.UserUID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}, {ContainerID: testenv.UserGID, HostID: testenv.UserGID, Size: 1}},
		GidMappingsEnableSetgroups: true,
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestUsernsOverlayProbeWhenDisabled") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

// probeWithUsernsDisabled runs as root of the test's user namespace:
// it disables namespaces below it, becomes the user and probes.
func probeWithUsernsDisabled(t *testing.T, dir string) {
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0o644); err != nil {
		t.Fatalf("disable user namespaces below this one: %v", err)
	}
	if err := syscall.Setgroups(nil); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setgid(testenv.UserGID); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setuid(testenv.UserUID); err != nil {
		t.Fatal(err)
	}
	err := backend.UsernsOverlay{}.Probe(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "user.max_user_namespaces = 0") || !strings.Contains(err.Error(), "sysctl -w") {
		t.Fatalf("probe with user namespaces disabled: %v", err)
	}
	if _, _, err := backend.Select(context.Background(), "auto", dir, ""); err != nil {
		t.Fatalf("auto must fall back to copy: %v", err)
	}
}
