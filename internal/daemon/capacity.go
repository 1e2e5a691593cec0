package daemon

import (
	"fmt"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/proc"
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
	if b, err := backend.Get(backendName); err == nil && b.Caps().FullCopy {
		disk = uint64(goldenBytes)
	}
	return mem, disk
}

// capacityError refuses a pool whose max would not fit: better a clear
// error at the first acquire than a machine swapping or a store filling
// up half-way through a test run. resMem and resDisk are what the
// daemon's other pools may still take (they count too: L6 of issue 12).
func capacityError(max int, mem, disk, memAvail, diskFree, resMem, resDisk uint64) error {
	needMem, needDisk := uint64(max)*mem, uint64(max)*disk
	others := func(res uint64) string {
		if res == 0 {
			return ""
		}
		return fmt.Sprintf(" once the other pools take the %d MiB they may still grow by", res>>20)
	}
	if memAvail > 0 {
		room := sub(memAvail*9/10, resMem)
		if needMem > room {
			return errs.Invalid("pool max %d needs about %d MiB of memory (%d MiB per instance), but %d MiB is left%s: lower [pool] max (about %d fits)",
				max, needMem>>20, mem>>20, room>>20, others(resMem), max64(1, room/mem))
		}
	}
	if diskFree > 0 {
		room := sub(diskFree, resDisk)
		if needDisk > room {
			return errs.Invalid("pool max %d needs about %d MiB of disk in the store (%d MiB per instance), but %d MiB is left%s: lower [pool] max (about %d fits) or use a copy-on-write store (`dbfork doctor`)",
				max, needDisk>>20, disk>>20, room>>20, others(resDisk), max64(1, room/disk))
		}
	}
	return nil
}

// sub is a - b, at least 0.
func sub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// checkCapacity applies capacityError to this machine for a pool of max
// instances, besides the room the other live pools (not self) may still
// take up to their max. d.mu is held.
func (d *Daemon) checkCapacity(self *entry, engineName, backendName string, goldenBytes int64, max int) error {
	mem, disk := perInstance(engineName, backendName, goldenBytes)
	var resMem, resDisk uint64
	for _, e := range d.pools {
		if e == self || e.retired {
			continue
		}
		st := e.pool.Stats()
		if grow := st.Max + st.Ahead - st.Leased - st.Ready - st.Warming; grow > 0 {
			m, dk := perInstance(e.eng.Name(), e.backend, e.golden.Manifest.TotalBytes)
			resMem += uint64(grow) * m
			resDisk += uint64(grow) * dk
		}
	}
	free, _ := fsutil.FreeBytes(d.o.Store.Root)
	return capacityError(max, mem, disk, proc.MemInfo("MemAvailable"), free, resMem, resDisk)
}
