package store

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// removeIPC removes the shared memory a dynamic uid's processes left
// behind once all of them are dead: POSIX segments in /dev/shm
// (PostgreSQL's dynamic shared memory) and System V segments and
// semaphore sets it owns. A server stopped in order removes its own; a
// killed one (a crash, `kill -9`, gc) does not, and each would hold up to
// a MiB of memory and one of the kernel's few thousand segment ids until
// reboot. Only called for a uid whose claim the caller holds and whose
// processes it killed: nothing of it can be in use.
func removeIPC(uid int) {
	if !IsDynamicUID(uid) {
		return
	}
	if ents, err := os.ReadDir("/dev/shm"); err == nil {
		for _, e := range ents {
			p := filepath.Join("/dev/shm", e.Name())
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && int(st.Uid) == uid && st.Mode&unix.S_IFMT == unix.S_IFREG {
				_ = os.Remove(p)
			}
		}
	}
	for _, id := range sysvOwnedBy("/proc/sysvipc/shm", uid, 7) {
		_, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
	for _, id := range sysvOwnedBy("/proc/sysvipc/sem", uid, 4) {
		_, _, _ = syscall.Syscall6(syscall.SYS_SEMCTL, uintptr(id), 0, uintptr(unix.IPC_RMID), 0, 0, 0)
	}
}

// sysvOwnedBy lists the ids (second column) of the System V objects in a
// /proc/sysvipc table whose owner (column uidCol) or creator (the column
// two to the right) is uid.
func sysvOwnedBy(table string, uid, uidCol int) []int {
	f, err := os.Open(table)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ids []int
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	want := strconv.Itoa(uid)
	for sc.Scan() {
		c := strings.Fields(sc.Text())
		if len(c) <= uidCol+2 || (c[uidCol] != want && c[uidCol+2] != want) {
			continue
		}
		if id, err := strconv.Atoi(c[1]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
