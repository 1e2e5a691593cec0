package instance

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/store"
)

// Reaped is an instance gc removed (or failed to).
type Reaped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// GC removes instances nobody holds that are not live `up` instances:
// leftovers of crashed `run`/`up`/`serve` processes, and `up` instances
// whose server died. With all set, live `up` instances go too.
func GC(ctx context.Context, s *store.Store, all bool) []Reaped {
	entries, _ := os.ReadDir(s.InstancesDir())
	var out []Reaped
	for _, p := range backend.ReapProbes(s.InstancesDir()) {
		out = append(out, Reaped{ID: filepath.Base(p), Reason: "a backend probe whose process died"})
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() && ValidID(name) {
			if r, ok := gcOne(ctx, s, name, all); ok {
				out = append(out, r)
			}
			continue
		}
		// A lock file whose instance is gone (crash between the two).
		if id, ok := strings.CutSuffix(name, ".lock"); ok && ValidID(id) {
			if _, err := os.Stat(s.InstanceDir(id)); errors.Is(err, os.ErrNotExist) {
				if l, err := lockfile.TryLock(filepath.Join(s.InstancesDir(), name)); err == nil {
					l.Remove()
				}
			}
		}
	}
	// Last, the uids of instances and builds that are gone by now: what
	// their SQL started is killed, and the uid freed.
	if _, err := store.SweepUsers(ctx); err != nil {
		out = append(out, Reaped{ID: "uids", Reason: "processes of a removed instance or build", Error: err.Error()})
	}
	return out
}

func gcOne(ctx context.Context, s *store.Store, id string, all bool) (Reaped, bool) {
	lock, err := lockfile.TryLock(lockPath(s, id))
	if err != nil {
		return Reaped{}, false // held: a live process owns it
	}
	defer lock.Release()
	st, err := Load(s, id)
	if err != nil {
		return Reaped{}, false
	}
	reason := ""
	switch {
	case st.Status == StatusReady && st.Detached && st.Alive():
		if !all {
			return Reaped{}, false // a live `up` instance
		}
		reason = "stopped by gc --all"
	case st.Status == StatusReady && st.Detached:
		reason = "its server is no longer running"
	case st.Status == StatusCreating || st.Status == "":
		reason = "its creator died while starting it"
	case st.Status == StatusStopping:
		reason = "it was being removed when dbfork stopped"
	case st.Status == StatusResetting:
		reason = "it was being reset when dbfork stopped"
	default:
		reason = "the process that held it died"
	}
	r := Reaped{ID: id, Reason: reason}
	if err := teardown(ctx, st); err != nil {
		r.Error = err.Error()
		return r, true
	}
	_ = os.Remove(lockPath(s, id))
	return r, true
}
