package daemon

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// Per-instance needs under the test profile, measured on this project's
// VM (server RSS after start plus a margin for a test's work): PostgreSQL
// with small shared_buffers, MariaDB/MySQL with a 64 MiB buffer pool.
// Disk: what a copy-on-write clone owns after start and a short test; a
// plain copy owns the whole golden.
const cowDisk = 64 << 20

func perInstance(engineName, backendName string, goldenBytes int64) (mem, disk uint64) {
	mem = 192 << 20 // an engine dbfork does not know: the larger figure
	if e, err := engines.Lookup(engineName); err == nil {
		mem = e.MemoryPerInstance
	}
	disk = cowDisk
	if backendName == "copy" {
		disk = uint64(goldenBytes)
	}
	return mem, disk
}

// capacityError refuses a pool whose max would not fit: better a clear
// error at the first acquire than a machine swapping or a store filling
// up half-way through a test run.
func capacityError(max int, mem, disk, memAvail, diskFree uint64) error {
	needMem, needDisk := uint64(max)*mem, uint64(max)*disk
	if memAvail > 0 && needMem > memAvail*9/10 {
		fit := max64(1, memAvail*9/10/mem)
		return errs.Invalid("pool max %d needs about %d MiB of memory (%d MiB per instance), but %d MiB is available: lower [pool] max (about %d fits)",
			max, needMem>>20, mem>>20, memAvail>>20, fit)
	}
	if diskFree > 0 && needDisk > diskFree {
		fit := max64(1, diskFree/disk)
		return errs.Invalid("pool max %d needs about %d MiB of disk in the store (%d MiB per instance), but %d MiB is free: lower [pool] max (about %d fits) or use a copy-on-write store (`dbfork doctor`)",
			max, needDisk>>20, disk>>20, diskFree>>20, fit)
	}
	return nil
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// checkCapacity applies capacityError to this machine.
func (d *Daemon) checkCapacity(engineName, backendName string, goldenBytes int64, max int) error {
	mem, disk := perInstance(engineName, backendName, goldenBytes)
	free, _ := fsutil.FreeBytes(d.o.Store.Root)
	return capacityError(max, mem, disk, memAvailable(), free)
}

// memAvailable reads MemAvailable from /proc/meminfo (0 if unknown).
func memAvailable() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
