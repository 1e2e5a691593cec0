// Package api is dbfork's local HTTP/JSON API: the wire types, the
// server side (over any Service, normally the daemon) and a client. It
// listens on a unix socket in the store (mode 0600) and, optionally, on a
// loopback TCP port behind a bearer token. docs/api.md describes it.
package api

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
)

// SocketName is the API socket's name inside the store.
const SocketName = "dbfork.sock"

// TokenName is the file in the store holding the TCP bearer token.
const TokenName = "api-token"

// Service is what the API exposes; the daemon implements it.
type Service interface {
	Health() Health
	EnsureGolden(ctx context.Context, req GoldenRequest, peer Peer) (*Golden, error)
	Acquire(ctx context.Context, req AcquireRequest, peer Peer) (*Lease, error)
	// A caller sees and ends only its own leases, unless it is root or
	// holds the TCP token (Peer.All).
	Release(id string, peer Peer) error
	Keep(id string, peer Peer) (*Lease, error)
	Leases(peer Peer) []Lease
	// Pools lists the pools the caller made or leased from (every pool
	// for root and TCP token holders).
	Pools(peer Peer) []PoolInfo
	// Reset takes a lease's instance back to the golden state in place.
	Reset(ctx context.Context, id string, peer Peer) (*Lease, error)
	// CreateDatabase hands out a fresh database inside a lease's server
	// (Lease.Fresh == FreshDatabase); DropDatabase drops one early.
	CreateDatabase(ctx context.Context, id string, peer Peer) (*Database, error)
	DropDatabase(ctx context.Context, id, name string, peer Peer) error
	// Fresh gives the next test of a lease fresh data, the fastest way
	// the lease can (POST /v1/leases/{id}/fresh).
	Fresh(ctx context.Context, id string, peer Peer) (*FreshDB, error)
	// DownKept and ResetKept act on an instance kept through the daemon
	// (POST /v1/leases/{id}/keep, `dbfork up`) for the peer who kept it
	// (or root): its record is the daemon's, which that peer may not read.
	DownKept(ctx context.Context, id string, peer Peer) error
	ResetKept(ctx context.Context, id string, peer Peer) (*Lease, error)
}

// How a lease gives a test fresh data (Lease.Fresh).
const (
	// FreshDatabase: POST /v1/leases/{id}/databases hands out a database
	// cloned inside the running server (PostgreSQL >= 18 with
	// file_copy_method=clone on a store that shares extents).
	FreshDatabase = "database"
	// FreshReset: POST /v1/leases/{id}/reset puts the whole instance back
	// to the golden state.
	FreshReset = "reset"
)

// Database is a fresh database inside a leased server (POST
// /v1/leases/{id}/databases).
type Database struct {
	Name      string            `json:"name"`
	DSN       string            `json:"dsn"`
	SocketDSN string            `json:"socket_dsn"`
	Env       map[string]string `json:"env"`
	Ms        float64           `json:"ms"` // time inside the daemon
	// OnDemand: none was cloned ahead, the caller waited for this one.
	OnDemand bool `json:"cloned_on_demand,omitempty"`
}

// Modes of a fresh call (FreshDB.Mode).
const (
	ModeSlot     = "slot"     // the next unused slot built into the golden
	ModeDatabase = "database" // a database cloned inside the server
	ModeReset    = "reset"    // the instance reset in place
	ModeNone     = "none"     // the lease is untouched: its own database
)

// FreshDB answers POST /v1/leases/{id}/fresh: the database the next test
// uses, and how the daemon made it fresh.
type FreshDB struct {
	Mode      string            `json:"mode"`
	Name      string            `json:"name"`
	DSN       string            `json:"dsn"`
	SocketDSN string            `json:"socket_dsn"`
	Env       map[string]string `json:"env"`
	Conn      Conn              `json:"conn"`
	Ms        float64           `json:"ms"` // time inside the daemon
	// SlotsLeft: unused slots of the lease's instance after this call.
	SlotsLeft int `json:"slots_left"`
}

// Conn is a connection, field by field. Socket is the server's socket
// directory, empty when the caller cannot use it (then host and port).
type Conn struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user"`
	Password string `json:"password,omitempty"`
	Database string `json:"database"`
	Socket   string `json:"socket,omitempty"`
}

// EmptyRequest is the body of calls that take no parameters: `{}`.
type EmptyRequest struct{}

// Peer is who called, as the kernel reports it for unix sockets
// (SO_PEERCRED). Over TCP it is zero.
type Peer struct {
	Unix bool
	PID  int
	UID  int
	GID  int
}

// All says whether the caller may see and end every lease: root on the
// unix socket, or a TCP caller (who showed the token only root can read).
func (p Peer) All() bool { return !p.Unix || p.UID == 0 }

// Owns says whether the caller may see and end a lease acquired by owner
// (a uid; -1 for leases acquired over TCP).
func (p Peer) Owns(owner int) bool { return p.All() || p.UID == owner }

// Health answers GET /v1/health.
type Health struct {
	Status  string    `json:"status"` // "ok"
	PID     int       `json:"pid"`
	Store   string    `json:"store"`
	Started time.Time `json:"started"`
	Pools   int       `json:"pools"`
	Leases  int       `json:"leases"`
	// API is the API version the daemon speaks (APIVersion); clients
	// refuse a daemon that speaks another. Version is dbfork's own.
	API     int    `json:"api"`
	Version string `json:"version"`
}

// GoldenRequest asks for a recipe's golden to exist (POST /v1/goldens).
type GoldenRequest struct {
	Recipe string `json:"recipe"` // absolute path of a dbfork.toml
	// Env is the client's environment: a build's run steps get its PATH,
	// virtualenv, node, Java and Ruby set-up and what the recipe's env
	// names, never the daemon's (docs/api.md). Omitted: the daemon's
	// PATH and locale only.
	Env map[string]string `json:"env,omitempty"`
}

// Environ is this process's environment as a request's Env, for clients
// written in Go (the CLI, dbforktest).
func Environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// MaxEnvBytes bounds the environment a request may carry.
const MaxEnvBytes = 256 << 10

// CheckEnv is the one rule for a request's env.
func CheckEnv(env map[string]string) error {
	n := 0
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return errs.Invalid("env: %q is not a variable a process can have", k)
		}
		n += len(k) + len(v) + 2
	}
	if n > MaxEnvBytes {
		return errs.Invalid("env: %d bytes, at most %d: send only what build steps need", n, MaxEnvBytes)
	}
	return nil
}

// Golden answers POST /v1/goldens.
type Golden struct {
	Key     string  `json:"key"`
	Engine  string  `json:"engine"`
	Version string  `json:"version"`
	Built   bool    `json:"built"`  // false: it was already there
	Waited  bool    `json:"waited"` // another process was building it
	Ms      float64 `json:"ms"`
}

// AcquireRequest asks for a lease on a fresh instance (POST /v1/leases).
type AcquireRequest struct {
	Recipe  string `json:"recipe"`            // absolute path of a dbfork.toml
	Backend string `json:"backend,omitempty"` // default "auto"
	// Pool bounds for the recipe's pool (default: the recipe's [pool]).
	Min *int `json:"min,omitempty"`
	Max *int `json:"max,omitempty"`
	// The lease ends when process PID exits (default: the caller, from
	// the socket), after TTLSeconds if set, or on release.
	PID        int     `json:"pid,omitempty"`
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// How long to wait for a free instance (default 120).
	WaitSeconds float64 `json:"wait_seconds,omitempty"`
	// Env: as in GoldenRequest, for a golden this request builds.
	Env map[string]string `json:"env,omitempty"`
}

// Longest wait and TTL a request may ask for.
const (
	MaxWaitSeconds = 3600
	MaxTTLSeconds  = 7 * 24 * 3600
)

// Check refuses numbers that are negative or beyond the caps (a TTL of
// 1e10 s would overflow a time.Duration into the past).
func (r AcquireRequest) Check() error {
	if r.TTLSeconds < 0 || r.WaitSeconds < 0 || r.PID < 0 {
		return errs.Invalid("ttl_seconds, wait_seconds and pid must not be negative")
	}
	if r.WaitSeconds > MaxWaitSeconds || r.TTLSeconds > MaxTTLSeconds {
		return errs.Invalid("wait_seconds is at most %d and ttl_seconds at most %d", MaxWaitSeconds, MaxTTLSeconds)
	}
	return CheckEnv(r.Env)
}

// Lease is a handed-out instance.
type Lease struct {
	ID        string            `json:"id"` // the instance id (dbfork ls, dbfork down)
	Golden    string            `json:"golden"`
	Engine    string            `json:"engine"`
	Backend   string            `json:"backend"`
	DSN       string            `json:"dsn"`
	SocketDSN string            `json:"socket_dsn"`
	Env       map[string]string `json:"env"` // DATABASE_URL, PG*/MYSQL_*, DBFORK_INSTANCE
	HolderPID int               `json:"holder_pid,omitempty"`
	Leased    time.Time         `json:"leased"`
	ExpiresAt *time.Time        `json:"expires_at,omitempty"`
	AcquireMs float64           `json:"acquire_ms"` // time inside the daemon
	ReadyMs   float64           `json:"ready_ms"`   // how long the instance took to clone and start
	// ReadySteps is where ReadyMs went: clone, start; or for an instance
	// recycled from a released one: stop, restore, move, start (OverlayFS:
	// stop, remove, clone, start).
	ReadySteps  map[string]float64 `json:"ready_steps_ms,omitempty"`
	Pool        string             `json:"pool"`
	Kept        bool               `json:"kept,omitempty"` // handed over: lives until `dbfork down`
	InstanceDir string             `json:"instance_dir"`
	// Fresh is FreshDatabase or FreshReset: the fastest way this lease
	// gives a test fresh data.
	Fresh string `json:"fresh"`
	// Slots the golden has ([fresh] slots): POST /v1/leases/{id}/fresh
	// hands them out first.
	Slots   int     `json:"slots,omitempty"`
	Resets  int     `json:"resets,omitempty"`   // resets so far
	ResetMs float64 `json:"reset_ms,omitempty"` // the last reset, inside the daemon
	// ResetSteps is where the last reset's time went (ms per step).
	ResetSteps map[string]float64 `json:"reset_steps_ms,omitempty"`
}

// PoolInfo describes one pool (GET /v1/pools).
type PoolInfo struct {
	ID      string `json:"id"`
	Recipe  string `json:"recipe"`
	Golden  string `json:"golden"`
	Engine  string `json:"engine"`
	Backend string `json:"backend"`
	Retired bool   `json:"retired,omitempty"` // its recipe now builds another golden; it drains
	PoolStats
}

// PoolStats are a pool's counts (the API's own copy of the daemon's pool
// state, so the wire format does not follow internal types).
type PoolStats struct {
	Min        int    `json:"min"`
	Max        int    `json:"max"`
	Ahead      int    `json:"ahead,omitempty"` // instances past max for leases' next ones (goldens with slots)
	Warming    int    `json:"warming"`
	Ready      int    `json:"ready"`
	Leased     int    `json:"leased"`
	Discarding int    `json:"discarding"`
	Waiting    int    `json:"waiting"`
	LastError  string `json:"last_error,omitempty"`
	Closed     bool   `json:"closed,omitempty"`
}

// ErrorBody is every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"` // invalid, not_found, conflict, unsupported, missing_tool, busy, internal
}
