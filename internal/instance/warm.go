package instance

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/reexec"
	"github.com/dbfork/dbfork/internal/store"
)

// warmArg is the hidden first argument that makes any binary built with
// this package the background reader WarmInBackground starts:
//
//	BINARY __dbfork-warm UID GROUPS DATADIR
//
// It starts as root (the binary may sit where only root can run it: a
// test binary in Go's private build dir) and becomes UID, with the
// comma-separated supplementary GROUPS (those the server gets: the clone's
// files are the store's server user's, readable by its group), before it
// reads.
//
// It is a helper main of the reexec registry, run by main and TestMain
// (reexec.Main): tests start instances from test binaries.
const warmArg = "__dbfork-warm"

// WarmLog is the file, in the instance dir, where the background reader
// says what it read (one JSON line) or why it read nothing.
const WarmLog = "warm.log"

func init() {
	reexec.Register(warmArg, func(args []string) int {
		if len(args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: "+warmArg+" UID GROUPS DATADIR")
			return 2
		}
		return warmMain(args[0], args[1], args[2])
	})
}

// WarmInBackground starts a process that reads every file of the clone
// once, after the server is ready and without delaying anyone: `up` and
// `run` hand the instance out at once, and the reader fills the page
// cache while the first tests run. Linux keeps cached pages per file, so
// a reflink or snapshot clone starts with none of the golden's cache and
// serves its first reads from the disk (MariaDB sysbench, 10.11, medians
// of 8 runs: a cold reflink clone 1731 tps, with this reader 1844, read
// in full before the run 1954, a plain copy 2056; docs/mariadb.md). A
// daemon's pool does the same, in the foreground, before a lease
// (Prewarm).
//
// The reader runs as the instance's own uid, at the lowest CPU priority
// and in the idle I/O class (which only I/O schedulers with classes
// honour: not loop devices, whose scheduler is "none"); it stops by
// itself if the clone is larger than half of the memory available, and
// it dies with the instance: teardown and reset
// kill every process of the instance's uid. It is started only where
// that holds and where it helps: dbfork runs as root, the instance has a
// uid of its own, and the clone is a reflink or btrfs clone in dbfork's
// own mount namespace (an OverlayFS clone reads through the golden's
// shared cache; a copy has just been written and is cached).
//
// It returns false, with no error, when the instance is not one of those.
func (in *Instance) WarmInBackground(s *store.Store) (bool, error) {
	st := in.State
	if os.Geteuid() != 0 || !store.IsDynamicUID(st.UID) || st.Server == nil {
		return false, nil
	}
	if !st.Caps().ColdPageCache {
		return false, nil
	}
	if st.Server.Outside(st.DataDir) != st.DataDir {
		return false, nil // mounted in the server's namespace only
	}
	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	logf, err := os.OpenFile(filepath.Join(st.Dir, WarmLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return false, err
	}
	defer logf.Close()
	u := s.UserOf(st.UID)
	groups := make([]string, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = strconv.Itoa(int(g))
	}
	cmd := exec.Command(self, warmArg, strconv.Itoa(st.UID), strings.Join(groups, ","), st.DataDir)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: it outlives `up`, and no signal for the terminal
	// reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start background reader: %w", err)
	}
	// Reaped by the goroutine while this process lives (the daemon, a
	// test binary), by init once it is gone (`up`).
	go func() { _ = cmd.Wait() }()
	return true, nil
}

// warmResult is the line the reader writes to WarmLog.
type warmResult struct {
	Files   int     `json:"files"`
	Bytes   int64   `json:"bytes"`
	Ms      float64 `json:"ms"`
	Denied  int     `json:"denied,omitempty"` // files the instance's uid may not read
	Skipped string  `json:"skipped,omitempty"`
}

func warmMain(uidArg, groupsArg, data string) int {
	uid, err := strconv.Atoi(uidArg)
	if err != nil || !store.IsDynamicUID(uid) {
		fmt.Fprintf(os.Stderr, "dbfork: %s: %q is not an instance uid\n", warmArg, uidArg)
		return 2
	}
	var groups []int
	for _, g := range strings.Split(groupsArg, ",") {
		if g == "" {
			continue
		}
		n, err := strconv.Atoi(g)
		if err != nil || n == 0 {
			fmt.Fprintf(os.Stderr, "dbfork: %s: bad group %q\n", warmArg, g)
			return 2
		}
		groups = append(groups, n)
	}
	// Become the instance's uid (every thread: Go does it for all), so
	// that the instance's teardown, which kills its uid's processes, ends
	// this one too, and the reader can only read what the server can.
	err = syscall.Setgroups(groups)
	if err == nil {
		err = syscall.Setgid(uid)
	}
	if err == nil {
		err = syscall.Setuid(uid)
	}
	if err != nil || os.Geteuid() != uid || os.Getuid() != uid {
		fmt.Fprintf(os.Stderr, "dbfork: %s: become uid %d: %v\n", warmArg, uid, err)
		return 1
	}
	// Lowest CPU priority, and the idle I/O class: the reader gets the
	// disk only when nobody else wants it (where the I/O scheduler has
	// classes; elsewhere it still reads at most one 1 MiB block at once).
	_ = unix.Setpriority(unix.PRIO_PROCESS, 0, 19)
	const ioprioWhoProcess, ioprioClassIdle, ioprioClassShift = 1, 3, 13
	_, _, _ = unix.Syscall(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, ioprioClassIdle<<ioprioClassShift)
	t0 := time.Now()
	res := warmResult{}
	defer func() {
		res.Ms = float64(time.Since(t0).Microseconds()) / 1000
		_ = json.NewEncoder(os.Stdout).Encode(res)
	}()
	var files []string
	var total int64
	_ = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				files = append(files, p)
				total += fi.Size()
			}
		}
		return nil
	})
	if avail := int64(proc.MemInfo("MemAvailable")); avail > 0 && total > avail/2 {
		res.Skipped = fmt.Sprintf("the clone (%d MiB) is larger than half of the memory available (%d MiB)", total>>20, avail>>20)
		return 0
	}
	buf := make([]byte, 1<<20)
	for _, p := range files {
		// The clone is this uid's, and so are the test's files in it: never
		// follow a symlink, never block on a fifo.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !exists(data) {
				res.Skipped = "the clone went away"
				return 0
			}
			if errors.Is(err, fs.ErrPermission) {
				res.Denied++
			}
			continue
		}
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			res.Files++
			for {
				n, err := f.Read(buf)
				res.Bytes += int64(n)
				if err != nil {
					break
				}
			}
		}
		f.Close()
	}
	return 0
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
