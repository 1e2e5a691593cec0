// Package api is dbfork's local HTTP/JSON API: the wire types, the
// server side (over any Service, normally the daemon) and a client. It
// listens on a unix socket in the store (mode 0600) and, optionally, on a
// loopback TCP port behind a bearer token. docs/api.md describes it.
package api

import (
	"context"
	"time"
)

// SocketName is the API socket's name inside the store.
const SocketName = "dbfork.sock"

// TokenName is the file in the store holding the TCP bearer token.
const TokenName = "api-token"

// Service is what the API exposes; the daemon implements it.
type Service interface {
	Health() Health
	EnsureGolden(ctx context.Context, req GoldenRequest) (*Golden, error)
	Acquire(ctx context.Context, req AcquireRequest, peer Peer) (*Lease, error)
	Release(id string) error
	Keep(id string) (*Lease, error)
	Leases() []Lease
	Pools() []PoolInfo
}

// Peer is who called, as the kernel reports it for unix sockets
// (SO_PEERCRED). Over TCP it is zero.
type Peer struct {
	Unix bool
	PID  int
	UID  int
	GID  int
}

// Health answers GET /v1/health.
type Health struct {
	Status  string    `json:"status"` // "ok"
	PID     int       `json:"pid"`
	Store   string    `json:"store"`
	Started time.Time `json:"started"`
	Pools   int       `json:"pools"`
	Leases  int       `json:"leases"`
}

// GoldenRequest asks for a recipe's golden to exist (POST /v1/goldens).
type GoldenRequest struct {
	Recipe string `json:"recipe"` // absolute path of a dbfork.toml
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
}

// Lease is a handed-out instance.
type Lease struct {
	ID          string            `json:"id"` // the instance id (dbfork ls, dbfork down)
	Golden      string            `json:"golden"`
	Engine      string            `json:"engine"`
	Backend     string            `json:"backend"`
	DSN         string            `json:"dsn"`
	SocketDSN   string            `json:"socket_dsn"`
	Env         map[string]string `json:"env"` // DATABASE_URL, PG*/MYSQL_*, DBFORK_INSTANCE
	HolderPID   int               `json:"holder_pid,omitempty"`
	Leased      time.Time         `json:"leased"`
	ExpiresAt   *time.Time        `json:"expires_at,omitempty"`
	AcquireMs   float64           `json:"acquire_ms"` // time inside the daemon
	ReadyMs     float64           `json:"ready_ms"`   // how long the instance took to clone and start
	Pool        string            `json:"pool"`
	Kept        bool              `json:"kept,omitempty"` // handed over: lives until `dbfork down`
	InstanceDir string            `json:"instance_dir"`
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
