package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
)

// Client talks to a running `dbfork serve`.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// ErrNoDaemon means nothing answers on the socket: callers fall back to
// doing the work themselves.
var ErrNoDaemon = errors.New("no dbfork serve is running for this store")

// SocketPath is where the daemon of the store at root listens.
func SocketPath(root string) string { return filepath.Join(root, SocketName) }

// Dial returns a client for the daemon listening on the unix socket at
// path, after checking that it answers; ErrNoDaemon if nobody does.
func Dial(ctx context.Context, path string) (*Client, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, ErrNoDaemon
	}
	c := &Client{base: "http://dbfork", http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConnsPerHost: 4,
	}}}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.Health(hctx); err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, ErrNoDaemon // a socket left by a killed daemon
		}
		return nil, fmt.Errorf("dbfork serve at %s does not answer: %w", path, err)
	}
	return c, nil
}

// DialTCP returns a client for a daemon's loopback TCP listener.
func DialTCP(addr, token string) *Client {
	return &Client{base: "http://" + addr, token: token, http: &http.Client{}}
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			return fmt.Errorf("dbfork serve: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data))
		}
		return errs.FromWire(eb.Kind, eb.Error)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("dbfork serve: bad response to %s %s: %w", method, path, err)
	}
	return nil
}

// Health asks whether the daemon is up.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.do(ctx, "GET", "/v1/health", nil, &h)
}

// Touch is Health that also counts as use: a daemon started on demand
// then stays for its whole idle time, so the caller's next call finds it.
// (Plain health checks, such as `dbfork daemon status`, do not keep a
// daemon alive.)
func (c *Client) Touch(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.do(ctx, "GET", "/v1/health?touch=1", nil, &h)
}

// EnsureGolden builds (or finds) the golden of a recipe.
func (c *Client) EnsureGolden(ctx context.Context, req GoldenRequest) (*Golden, error) {
	var g Golden
	return &g, c.do(ctx, "POST", "/v1/goldens", req, &g)
}

// Acquire leases a fresh instance.
func (c *Client) Acquire(ctx context.Context, req AcquireRequest) (*Lease, error) {
	var l Lease
	return &l, c.do(ctx, "POST", "/v1/leases", req, &l)
}

// Release ends a lease; the instance is thrown away.
func (c *Client) Release(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/leases/"+id, nil, nil)
}

// Keep ends a lease but leaves the instance running, detached (it lives
// until `dbfork down`).
func (c *Client) Keep(ctx context.Context, id string) (*Lease, error) {
	var l Lease
	return &l, c.do(ctx, "POST", "/v1/leases/"+id+"/keep", nil, &l)
}

// Leases lists the current leases.
func (c *Client) Leases(ctx context.Context) ([]Lease, error) {
	var out struct {
		Leases []Lease `json:"leases"`
	}
	return out.Leases, c.do(ctx, "GET", "/v1/leases", nil, &out)
}

// Pools lists the pools.
func (c *Client) Pools(ctx context.Context) ([]PoolInfo, error) {
	var out struct {
		Pools []PoolInfo `json:"pools"`
	}
	return out.Pools, c.do(ctx, "GET", "/v1/pools", nil, &out)
}

// Reset takes a lease back to the golden state in place: same DSN, the
// data as the golden has it; open connections are broken.
func (c *Client) Reset(ctx context.Context, id string) (*Lease, error) {
	var l Lease
	return &l, c.do(ctx, "POST", "/v1/leases/"+id+"/reset", EmptyRequest{}, &l)
}

// CreateDatabase hands out a fresh database inside a lease's server
// (when the lease's Fresh is FreshDatabase; else kind unsupported).
func (c *Client) CreateDatabase(ctx context.Context, id string) (*Database, error) {
	var db Database
	return &db, c.do(ctx, "POST", "/v1/leases/"+id+"/databases", EmptyRequest{}, &db)
}

// Fresh gives the lease's next test fresh data: a slot, a database
// cloned in the server, the instance reset in place, or nothing to do
// (FreshDB.Mode); the lease's previous fresh database is retired.
func (c *Client) Fresh(ctx context.Context, id string) (*FreshDB, error) {
	var db FreshDB
	return &db, c.do(ctx, "POST", "/v1/leases/"+id+"/fresh", EmptyRequest{}, &db)
}

// DropDatabase drops a fresh database before its lease ends.
func (c *Client) DropDatabase(ctx context.Context, id, name string) error {
	return c.do(ctx, "DELETE", "/v1/leases/"+id+"/databases/"+name, nil, nil)
}

// DownKept stops and removes an instance the caller kept through the
// daemon (`dbfork up`): the daemon does it, as the record is its own.
func (c *Client) DownKept(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/v1/instances/"+id, nil, nil)
}

// ResetKept takes an instance the caller kept through the daemon back to
// the golden state in place.
func (c *Client) ResetKept(ctx context.Context, id string) (*Lease, error) {
	var l Lease
	return &l, c.do(ctx, "POST", "/v1/instances/"+id+"/reset", EmptyRequest{}, &l)
}
