package cli

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// doctor reads the kernel's huge page settings as they are, and advises
// pages on demand only where the kernel has huge pages and gives none.
func TestHugePages(t *testing.T) {
	h := readHugePages()
	for name, got := range map[string]uint64{"nr_hugepages": h.Reserved, "nr_overcommit_hugepages": h.Overcommit} {
		b, err := os.ReadFile("/proc/sys/vm/" + name)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if got != want {
			t.Errorf("%s read as %d, the kernel says %d", name, got, want)
		}
	}
	if h.PageBytes == 0 {
		t.Errorf("no huge page size read from /proc/meminfo")
	}
	for _, c := range []struct {
		h    hugePagesReport
		want bool
	}{
		{hugePagesReport{PageBytes: 2 << 20}, true},
		{hugePagesReport{PageBytes: 2 << 20, Overcommit: 512}, false},
		{hugePagesReport{PageBytes: 2 << 20, Reserved: 64}, false},
		{hugePagesReport{}, false},
	} {
		a := c.h.advice()
		if (a != "") != c.want {
			t.Errorf("advice for %+v: %q", c.h, a)
		}
		if a != "" && !strings.Contains(a, "vm.nr_overcommit_hugepages=") {
			t.Errorf("advice for %+v names no setting: %q", c.h, a)
		}
	}
}
