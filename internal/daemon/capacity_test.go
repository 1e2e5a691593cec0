package daemon

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/proc"
)

func TestCapacity(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		max                                            int
		mem, disk, memAvail, diskFree, resMem, resDisk uint64
		want                                           string
	}{
		{8, 48 * mib, 64 * mib, 4096 * mib, 100000 * mib, 0, 0, ""},
		{256, 192 * mib, 64 * mib, 24000 * mib, 100000 * mib, 0, 0, "memory"},
		{10, 48 * mib, 1024 * mib, 24000 * mib, 5000 * mib, 0, 0, "disk"},
		{10, 48 * mib, 1024 * mib, 0, 0, 0, 0, ""}, // unknown: allowed
		// Fits alone, not beside what the other pools may still take.
		{64, 192 * mib, 64 * mib, 24000 * mib, 100000 * mib, 12000 * mib, 0, "other pools"},
		{10, 48 * mib, 1024 * mib, 24000 * mib, 20000 * mib, 0, 12000 * mib, "other pools"},
	}
	for _, c := range cases {
		err := capacityError(c.max, c.mem, c.disk, c.memAvail, c.diskFree, c.resMem, c.resDisk)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v refused: %v", c, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fits") {
			t.Errorf("%+v: %v, want a refusal about %s with what fits", c, err, c.want)
		}
	}
	if proc.MemInfo("MemAvailable") == 0 {
		t.Error("MemAvailable not read from /proc/meminfo")
	}
	// Each engine's own figure, from its registry entry.
	if m, d := perInstance("postgres", "copy", 5<<30); m != 48<<20 || d != 5<<30 {
		t.Errorf("perInstance postgres copy: %d %d", m, d)
	}
	if m, d := perInstance("mariadb", "overlay", 5<<30); m != 192<<20 || d != cowDisk {
		t.Errorf("perInstance mariadb overlay: %d %d", m, d)
	}
}

// The next instances of a pool of a golden with slots are halved until
// max + ahead fits the machine, down to none; they never make a pool
// refused that fits without them.
func TestAheadThatFits(t *testing.T) {
	for _, c := range []struct{ ahead, room, want int }{
		{8, 100, 8}, {8, 7, 4}, {8, 3, 2}, {8, 0, 0}, {0, 100, 0}, {5, 2, 2},
	} {
		if got := aheadThatFits(c.ahead, func(n int) bool { return n <= c.room }); got != c.want {
			t.Errorf("ahead %d with room for %d: %d, want %d", c.ahead, c.room, got, c.want)
		}
	}
}
