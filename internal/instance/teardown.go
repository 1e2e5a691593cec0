package instance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/proc"
)

// teardown undoes an instance from its record: stop the server (by
// recorded identity, or via its own pid file when the crash came before
// the record was written), unmount, remove. It is idempotent.
func teardown(ctx context.Context, st *State) error {
	if st.Status != "" && st.Status != StatusStopping {
		st.Status = StatusStopping
		if _, err := os.Stat(st.Dir); err == nil {
			_ = st.save()
		}
	}
	if err := stopServer(ctx, st); err != nil {
		return err
	}
	if err := killUserProcesses(ctx, st); err != nil {
		return err
	}
	faults.At("down:stopped")
	if b, err := backend.Get(st.Backend); err == nil {
		if err := b.Remove(ctx, st.DataDir, st.Scratch); err != nil {
			return fmt.Errorf("remove clone of %s: %w", st.ID, err)
		}
	}
	for _, sfx := range []string{nextSuffix, asideSuffix, trashSuffix} { // left by a reset
		if b, err := backend.Get(st.Backend); err == nil {
			if err := removeClone(ctx, b, st.DataDir+sfx, st.Scratch+sfx); err != nil {
				return err
			}
		}
	}
	faults.At("down:unmounted")
	// Whatever the record says, nothing below the dir may stay mounted.
	if err := fsutil.UnmountAllUnder(st.Dir); err != nil {
		return err
	}
	if err := backend.RemoveDataDir(st.DataDir); err != nil {
		return err
	}
	if err := fsutil.RemoveAll(st.Dir); err != nil {
		return err
	}
	return releaseUser(st)
}

func stopServer(ctx context.Context, st *State) error {
	if st.Server != nil && st.Server.Process.Alive() {
		return engine.StopRecorded(ctx, st.Server, false)
	}
	// No live record: a server may still have started just before a
	// crash. Its pid file names it; it is ours only if its working dir is
	// this clone (servers chdir into their data dir).
	id, ok := fromPIDFile(st.PIDFile, st.DataDir)
	if !ok {
		// A clone mounted only in its server's namespace keeps that pid
		// file out of sight: the helper that started it left one in scratch.
		id, ok = pidFromFile(filepath.Join(st.Scratch, backend.NamespacePIDFile), st.DataDir)
	}
	if !ok {
		return nil
	}
	srv := &engine.Server{Engine: st.Engine, Process: id}
	return engine.StopRecorded(ctx, srv, false)
}

func fromPIDFile(pidFile, dataDir string) (proc.Identity, bool) {
	if pidFile == "" || !strings.HasPrefix(pidFile, dataDir+"/") {
		return proc.Identity{}, false
	}
	return pidFromFile(pidFile, dataDir)
}

// pidFromFile trusts the PID in pidFile only if that process works in
// dataDir.
func pidFromFile(pidFile, dataDir string) (proc.Identity, bool) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return proc.Identity{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if err != nil || pid <= 1 {
		return proc.Identity{}, false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return proc.Identity{}, false
	}
	want, _ := filepath.EvalSymlinks(dataDir)
	if filepath.Clean(cwd) != filepath.Clean(dataDir) && filepath.Clean(cwd) != want {
		return proc.Identity{}, false
	}
	id, err := proc.Of(pid)
	return id, err == nil
}
