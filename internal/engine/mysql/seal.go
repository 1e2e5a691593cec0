package mysql

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// Seal gives a cleanly stopped MariaDB golden the redo log its clones run
// with. The build loaded with a small log (buildRedoLog); one more start
// with cloneRedoLog makes InnoDB rebuild ib_logfile0 at that size
// (preallocated, all but a few blocks zero), a slow shutdown checkpoints
// it, and the zero blocks are then punched out. The golden so carries a
// 256 MiB log that owns a few KiB of disk: reflink and btrfs clones share
// it, OverlayFS copies it up in milliseconds (holes are skipped), copies
// and OCI artifacts stay small, and a clone's writes do not wait for the
// forced checkpoints a 16 MiB log needed every few seconds.
//
// spec is the build server's; the sealing server does not listen and
// runs no setup. MySQL keeps its layout (nothing to do).
func (e *Engine) Seal(ctx context.Context, spec engine.StartSpec) error {
	if e.Bin.Info.Flavor != MariaDB {
		return nil
	}
	spec.Listen, spec.Password, spec.Port = false, "", 0
	spec.Settings = map[string]string{"innodb_log_file_size": cloneRedoLog, "innodb_fast_shutdown": "0"}
	srv, err := e.Start(ctx, spec)
	if err != nil {
		if srv != nil {
			_ = e.Stop(context.WithoutCancel(ctx), srv, false)
		}
		return fmt.Errorf("seal golden (redo log %s): %w", cloneRedoLog, err)
	}
	if err := e.Stop(ctx, srv, true); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	if err := e.CheckCleanShutdown(ctx, spec.DataDir, spec.LogFile); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	if _, err := fsutil.PunchZeros(filepath.Join(spec.DataDir, "ib_logfile0"), 4096); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	return nil
}
