package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Sysctl is a kernel setting by its sysctl name ("fs.suid_dumpable",
// "vm.nr_hugepages"), read from /proc/sys with white space trimmed.
func Sysctl(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') || strings.Contains(name, "..") {
		return "", fmt.Errorf("sysctl name %q: want dotted words, as sysctl(8) names them", name)
	}
	b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(name, ".", "/"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// SysctlUint is Sysctl for a setting that is one unsigned number; 0 when
// it cannot be read.
func SysctlUint(name string) uint64 {
	v, err := Sysctl(name)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}
