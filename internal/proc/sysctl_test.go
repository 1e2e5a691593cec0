package proc

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// Sysctl reads a setting by its dotted name and refuses names that are
// paths.
func TestSysctl(t *testing.T) {
	if v, err := Sysctl("kernel.ostype"); err != nil || v != "Linux" {
		t.Fatalf("kernel.ostype = %q (%v), want Linux", v, err)
	}
	raw, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if got := SysctlUint("kernel.pid_max"); got != want || got == 0 {
		t.Fatalf("kernel.pid_max = %d, want %d", got, want)
	}
	if _, err := Sysctl("kernel.no_such_setting"); err == nil {
		t.Fatal("a setting that does not exist read without an error")
	}
	if got := SysctlUint("kernel.ostype"); got != 0 {
		t.Fatalf("SysctlUint of a word = %d, want 0", got)
	}
	for _, bad := range []string{"", "../self/status", "kernel/ostype", "kernel..ostype"} {
		if _, err := Sysctl(bad); err == nil || !strings.Contains(err.Error(), "dotted") {
			t.Errorf("Sysctl(%q) = %v, want a refusal naming the form", bad, err)
		}
	}
}
