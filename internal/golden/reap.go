package golden

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/store"
)

// Leftover is a build dir gc found and removed (or could not).
type Leftover struct {
	Path   string `json:"path"`
	Server int    `json:"stopped_server_pid,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ReapBuilds removes build dirs nobody is building: those whose key's lock
// is free (the builder died), or, with key set, those of that key (the
// caller holds its lock). Servers they recorded are stopped by identity.
func ReapBuilds(ctx context.Context, s *store.Store, key string, log *slog.Logger) []Leftover {
	entries, err := os.ReadDir(s.GoldensDir())
	if err != nil {
		return nil
	}
	var out []Leftover
	for _, e := range entries {
		if validKey(e.Name()) && (key == "" || e.Name() == key) {
			// A final dir without a valid manifest nobody is working on:
			// set aside, then reaped below on a later pass or now.
			if _, err := Lookup(s, e.Name()); err != nil && (key != "" || !lockfile.Held(s.BuildLock(e.Name()))) {
				if tmp, err := Unpublish(s, e.Name()); err == nil {
					out = append(out, reapBuild(ctx, tmp, log))
				}
			}
			continue
		}
		if !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		dir := filepath.Join(s.GoldensDir(), e.Name())
		k := readKey(dir)
		if key != "" && k != key {
			continue
		}
		if key == "" {
			if k != "" && lockfile.Held(s.BuildLock(k)) {
				continue // a live build
			}
			if k == "" {
				// Crashed before writing its key; give a live build a
				// moment to get there.
				if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Minute {
					continue
				}
			}
		}
		out = append(out, reapBuild(ctx, dir, log))
	}
	return out
}

func readKey(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, keyFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func reapBuild(ctx context.Context, dir string, log *slog.Logger) Leftover {
	lo := Leftover{Path: dir}
	if data, err := os.ReadFile(filepath.Join(dir, serverFile)); err == nil {
		var srv engine.Server
		if json.Unmarshal(data, &srv) == nil && srv.Process.Alive() {
			lo.Server = srv.Process.PID
			if err := engine.StopRecorded(ctx, &srv, false); err != nil {
				lo.Error = err.Error()
				return lo
			}
		}
	}
	// A server started just before a crash, not yet recorded: it works
	// in the build's data dir.
	for _, id := range proc.WorkingIn(filepath.Join(dir, "data")) {
		if lo.Server == 0 {
			lo.Server = id.PID
		}
		if err := engine.StopRecorded(ctx, &engine.Server{Process: id}, false); err != nil {
			lo.Error = err.Error()
			return lo
		}
	}
	// What the build's SQL started goes with it, before its files do.
	if err := store.ReleaseOwned(ctx, dir); err != nil {
		lo.Error = err.Error()
		return lo
	}
	if err := discardBuild(dir); err != nil {
		lo.Error = err.Error()
	}
	if log != nil {
		log.Info("removed crashed build", "dir", dir, "server", lo.Server, "err", lo.Error)
	}
	return lo
}
