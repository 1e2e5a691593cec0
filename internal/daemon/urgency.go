package daemon

import (
	"github.com/dbfork/dbfork/internal/proc"
)

// The daemon's scheduling group. A test waits on the daemon's answers (a
// slot is microseconds of work) while the servers keep the cores busy;
// with the kernel's autogroups every backend is a group as heavy as the
// daemon's, and at 8 tests on 2 cores the fresh call waited for a core at
// every hop (p99 77–93 ms; 29–40 ms with the group at nice −10). So the
// daemon's group runs at proc.Urgent, as does each server's admin
// backend (engine/postgres). A build or pull it runs is different work:
// minutes of loading, page stamping, checksums or unpacking, which would
// take the machine from everything else at that priority; while one runs
// the group is back at nice 0.

// setUrgency gives the group the priority its work calls for now. It
// needs root (CAP_SYS_NICE) and a daemon that leads its session; else
// nothing changes.
func (d *Daemon) setUrgency() {
	if !d.o.Urgent {
		return
	}
	d.urgMu.Lock()
	defer d.urgMu.Unlock()
	n := proc.Urgent
	if d.building > 0 {
		n = 0
	}
	if err := proc.PrioritizeSelf(n); err != nil {
		d.o.Log.Debug("daemon priority unchanged", "nice", n, "err", err)
	}
}

// heavy marks a build or pull under way (project.Options.Heavy).
func (d *Daemon) heavy() (done func()) {
	d.urgMu.Lock()
	d.building++
	first := d.building == 1
	d.urgMu.Unlock()
	if first {
		d.setUrgency()
	}
	return func() {
		d.urgMu.Lock()
		d.building--
		last := d.building == 0
		d.urgMu.Unlock()
		if last {
			d.setUrgency()
		}
	}
}
