// Package instance runs a server on a fresh clone of a golden and tears it
// down again, leaving a record on disk at every step so that a crash at
// any point can be cleaned up by gc.
package instance

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// Statuses of an instance record.
const (
	StatusCreating = "creating"
	StatusReady    = "ready"
	StatusStopping = "stopping"
	// StatusResetting: the server is being swapped onto a fresh clone
	// (Reset); a crash then leaves a leftover gc removes.
	StatusResetting = "resetting"
)

// State is the on-disk record of an instance (state.json, mode 0600: it
// holds the instance password).
type State struct {
	ID         string         `json:"id"`
	Key        string         `json:"golden"`
	Engine     string         `json:"engine"`
	Backend    string         `json:"backend"`
	BackendWhy string         `json:"backend_reason"`
	Status     string         `json:"status"`
	Detached   bool           `json:"detached"` // made by `up`: lives until `down`
	Dir        string         `json:"dir"`
	DataDir    string         `json:"data_dir"`
	Scratch    string         `json:"scratch_dir"`
	PIDFile    string         `json:"pid_file"`      // the server's own pid file, a fallback record
	UID        int            `json:"uid,omitempty"` // the server's own uid, as root (store.ClaimUser)
	Server     *engine.Server `json:"server,omitempty"`
	Conn       *engine.Conn   `json:"conn,omitempty"`
	Created    time.Time      `json:"created"`
	CloneMs    float64        `json:"clone_ms"`
	StartMs    float64        `json:"start_ms"`
	ReadyMs    float64        `json:"ready_ms"` // clone + start + first query
	// What Reset needs to start the server again as it was.
	Recipe   string            `json:"recipe,omitempty"` // absolute path, for `dbfork reset`
	Settings map[string]string `json:"settings,omitempty"`
	// Closed are the golden's slots this instance's server refuses
	// (Options.CloseSlots), on every start.
	Closed  []string `json:"closed_databases,omitempty"`
	Resets  int      `json:"resets,omitempty"`
	ResetMs float64  `json:"reset_ms,omitempty"` // the last reset
	// ResetSteps: where the last reset's time went (ms per step).
	ResetSteps map[string]float64 `json:"reset_steps_ms,omitempty"`
	// Restored: what the last restore of the clone redid (restore.go).
	Restored *backend.Restored `json:"restored,omitempty"`
	// RecycledFrom: the released instance whose restored clone this one
	// took over (Recycle), instead of a new clone.
	RecycledFrom string `json:"recycled_from,omitempty"`
	// ReadySteps: where making this instance's time went (ms per step):
	// clone and start, or for a recycled one the old server's stop, the
	// restore, the move into this instance and the start.
	ReadySteps map[string]float64 `json:"ready_steps_ms,omitempty"`
	// Owner is the uid that kept it through the daemon (-1: a TCP
	// caller); the daemon takes it down or resets it for them. Nil when
	// it was not kept through a daemon.
	Owner *int `json:"owner,omitempty"`
}

func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

// lockPath is beside, not inside, the instance dir: it is taken before the
// dir exists, so gc never sees a half-made instance unlocked.
func lockPath(s *store.Store, id string) string {
	return filepath.Join(s.InstancesDir(), id+".lock")
}

func (st *State) save() error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	// Not synced: a reboot ends servers and mounts too, and gc removes
	// an instance whose record it cannot read.
	return fsutil.ReplaceFile(statePath(st.Dir), data, 0o600)
}

// Load reads one instance record.
func Load(s *store.Store, id string) (*State, error) {
	dir := s.InstanceDir(id)
	data, err := os.ReadFile(statePath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(dir); derr != nil {
			return nil, errs.NotFound("instance %s not found (see `dbfork ls`)", id)
		}
		return &State{ID: id, Dir: dir, DataDir: filepath.Join(dir, "data"), Scratch: filepath.Join(dir, "scratch")}, nil
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return &State{ID: id, Dir: dir, DataDir: filepath.Join(dir, "data"), Scratch: filepath.Join(dir, "scratch")}, nil
	}
	st.ID, st.Dir = id, dir // never trust paths outside the store
	return &st, nil
}

// List returns every instance record, oldest first.
func List(s *store.Store) ([]*State, error) {
	entries, err := os.ReadDir(s.InstancesDir())
	if err != nil {
		return nil, err
	}
	var out []*State
	for _, e := range entries {
		if !e.IsDir() || !ValidID(e.Name()) {
			continue
		}
		st, err := Load(s, e.Name())
		if err != nil {
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out, nil
}

// IDs lists the ids of every instance dir, readable or not.
func IDs(s *store.Store) []string {
	entries, _ := os.ReadDir(s.InstancesDir())
	var out []string
	for _, e := range entries {
		if e.IsDir() && ValidID(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

// Resolve finds an instance by id or unique id prefix.
func Resolve(s *store.Store, arg string) (string, error) {
	if !validPrefix(arg) {
		return "", errs.Invalid("instance id %q: ids are 8 hex digits (see `dbfork ls`)", arg)
	}
	// By name: a record this user cannot read (a root daemon's, kept
	// for them) still resolves, and the daemon decides what they may do.
	entries, err := os.ReadDir(s.InstancesDir())
	if err != nil {
		return "", err
	}
	var match []string
	for _, e := range entries {
		id := e.Name()
		if !e.IsDir() || !ValidID(id) {
			continue
		}
		if id == arg {
			return arg, nil
		}
		if strings.HasPrefix(id, arg) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return "", errs.NotFound("instance %s not found (see `dbfork ls`)", arg)
	case 1:
		return match[0], nil
	}
	return "", errs.Invalid("instance id prefix %s is ambiguous: %s", arg, strings.Join(match, ", "))
}

// ValidID reports whether id looks like an instance id (8 hex digits);
// a lease's id is its instance's.
func ValidID(id string) bool {
	return len(id) == 8 && strings.Trim(id, "0123456789abcdef") == ""
}

func validPrefix(p string) bool {
	return len(p) >= 1 && len(p) <= 8 && strings.Trim(p, "0123456789abcdef") == ""
}

// Alive reports whether the instance's server process is still running.
func (st *State) Alive() bool {
	return st.Server != nil && st.Server.Process.Alive()
}

func (st *State) String() string {
	return fmt.Sprintf("%s (%s on %s)", st.ID, st.Engine, st.Backend)
}

// View is what commands print about an instance.
type View struct {
	ID         string            `json:"id"`
	Golden     string            `json:"golden"`
	Engine     string            `json:"engine"`
	Backend    string            `json:"backend"`
	BackendWhy string            `json:"backend_reason"`
	Status     string            `json:"status"`
	Detached   bool              `json:"detached"`
	PID        int               `json:"pid,omitempty"`
	Port       int               `json:"port,omitempty"`
	DSN        string            `json:"dsn,omitempty"`
	SocketDSN  string            `json:"socket_dsn,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	Dir        string            `json:"dir"`
	Log        string            `json:"log"`
	Created    time.Time         `json:"created"`
	CloneMs    float64           `json:"clone_ms"`
	ReadyMs    float64           `json:"ready_ms"`
	LeasedBy   int               `json:"leased_by_pid,omitempty"` // set by `ls` when `dbfork serve` leased it out
	// WholeFileCopyUp: the first write to a file copies it whole (OverlayFS
	// where the store cannot reflink): the first-write trap.
	WholeFileCopyUp bool `json:"whole_file_copy_up,omitempty"`
}

// Public describes the instance for output. Status "dead" means the record
// says ready but the server is gone.
func (st *State) Public() View {
	v := View{
		ID: st.ID, Golden: st.Key, Engine: st.Engine, Backend: st.Backend, BackendWhy: st.BackendWhy,
		Status: st.Status, Detached: st.Detached, Dir: st.Dir, Log: filepath.Join(st.Dir, "server.log"),
		Created: st.Created, CloneMs: st.CloneMs, ReadyMs: st.ReadyMs,
	}
	if st.Server != nil {
		v.PID, v.Port = st.Server.Process.PID, st.Server.Port
	}
	if st.Conn != nil {
		v.DSN, v.SocketDSN, v.Env = st.Conn.URL, st.Conn.SocketURL, st.Conn.Env
	}
	if st.Status == StatusReady && !st.Alive() {
		v.Status = "dead"
	}
	v.WholeFileCopyUp = backend.WholeFileCopyUp(st.cloneBackend(), st.Scratch)
	return v
}

// cloneBackend is the backend st's clone was made with; nil for a name
// this dbfork does not know (a record from another version).
func (st *State) cloneBackend() backend.Backend {
	b, _ := backend.Get(st.Backend)
	return b
}

// Caps is what st's clone costs (see backend.Caps); zero for a backend
// this dbfork does not know.
func (st *State) Caps() backend.Caps {
	if b := st.cloneBackend(); b != nil {
		return b.Caps()
	}
	return backend.Caps{}
}

// ClientEnv is the environment a test gets for this instance: the
// engine's client variables (DATABASE_URL, PG*/MYSQL_*) and
// DBFORK_INSTANCE. Every way of handing out an instance (up, run, the
// daemon's leases, dbforktest) builds it here.
func (st *State) ClientEnv() map[string]string {
	env := map[string]string{"DBFORK_INSTANCE": st.ID}
	if st.Conn != nil {
		for k, v := range st.Conn.Env {
			env[k] = v
		}
	}
	return env
}
