package mysql

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

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
// forced checkpoints a 16 MiB log needed every few seconds. Last, every
// page's LSN is stamped to one fixed value (pagelsn.go) and the rows'
// transaction ids reset (pagetrx.go), so builds that load a table the
// same way give the same bytes.
//
// spec is the build server's; the sealing server does not listen, runs
// no setup and logs to seal.log. MySQL, and MariaDB before 10.5 (two log
// files), keep the build's layout.
func (e *Engine) Seal(ctx context.Context, spec engine.StartSpec) error {
	if !sealed(e.Bin.Info) {
		return nil
	}
	spec.Listen, spec.Password, spec.Port = false, "", 0
	spec.Settings = map[string]string{"innodb_log_file_size": cloneRedoLog, "innodb_fast_shutdown": "0"}
	spec.LogFile = filepath.Join(filepath.Dir(spec.LogFile), "seal.log") // the build's server.log stays
	srv, err := e.Start(ctx, spec)
	if err != nil {
		if srv != nil {
			_ = e.Stop(context.WithoutCancel(ctx), srv, false)
		}
		return fmt.Errorf("seal golden (redo log %s): %w", cloneRedoLog, err)
	}
	layouts, lerr := e.layoutsOf(ctx, srv)
	if err := e.Stop(ctx, srv, true); err != nil {
		_ = e.Stop(context.WithoutCancel(ctx), srv, false) // never leave it running
		return fmt.Errorf("seal golden: %w", err)
	}
	if err := e.CheckCleanShutdown(ctx, spec.DataDir, spec.LogFile); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	if _, err := fsutil.PunchZeros(filepath.Join(spec.DataDir, "ib_logfile0"), 4096); err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	st, err := stampPages(spec.DataDir, layouts)
	if err != nil {
		return fmt.Errorf("seal golden: %w", err)
	}
	note := fmt.Sprintf("dbfork: pages stamped: %d pages in %d tablespaces (transaction ids reset in %d); %d pages and %d tablespaces left as they were",
		st.Pages, st.Files, st.Rows, st.Kept, st.Skipped)
	if lerr != nil {
		note += "; transaction ids kept: " + lerr.Error()
	}
	return appendLine(spec.LogFile, note)
}

// layoutsOf asks the sealing server for its tables' row layouts.
func (e *Engine) layoutsOf(ctx context.Context, srv *engine.Server) (map[string]rowLayout, error) {
	db, err := open(ctx, srv, "root", "")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return rowLayouts(ctx, db)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sealed says whether goldens of this server are sealed with cloneRedoLog
// (MariaDB 10.5 and later: one ib_logfile0).
func sealed(info ServerInfo) bool {
	return info.Flavor == MariaDB && info.AtLeast(10, 5, 0)
}
