package proc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MemInfo is a field of /proc/meminfo ("MemTotal", "MemAvailable", …) in
// bytes, or 0 when it cannot be read.
func MemInfo(field string) uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
