package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
)

// testProfile turns durability off and keeps memory small. None of these
// change query results; they only make crashes unsafe, and a clone is
// thrown away anyway.
var testProfile = map[string]string{
	"fsync":                      "off",
	"synchronous_commit":         "off",
	"full_page_writes":           "off",
	"shared_buffers":             "32MB",
	"wal_level":                  "minimal",
	"max_wal_senders":            "0",
	"max_wal_size":               "1GB",
	"checkpoint_timeout":         "30min",
	"jit":                        "off",
	"track_io_timing":            "off",
	"max_worker_processes":       "4",
	"max_parallel_workers":       "2",
	"log_checkpoints":            "off",
	"log_min_messages":           "warning",
	"dynamic_shared_memory_type": "posix",
}

// Start runs postgres directly (not pg_ctl) so that the PID we record is
// the postmaster's. On a port collision it retries with a new port.
func (p *Postgres) Start(ctx context.Context, spec engine.StartSpec) (*engine.Server, error) {
	return engine.StartOnFreePort(spec, []string{"Address already in use"}, func(port int) (*engine.Server, error) {
		return p.startOnce(ctx, spec, port)
	})
}

func (p *Postgres) startOnce(ctx context.Context, spec engine.StartSpec, port int) (*engine.Server, error) {
	settings := map[string]string{
		"listen_addresses":        "",
		"unix_socket_directories": spec.SocketDir,
		"unix_socket_permissions": "0700",
		"port":                    fmt.Sprint(port),
	}
	if spec.Listen {
		settings["listen_addresses"] = "127.0.0.1"
	}
	if spec.Profile == engine.ProfileTest {
		for k, v := range testProfile {
			settings[k] = v
		}
		if p.ClonesDatabases() {
			settings["file_copy_method"] = "clone"
		}
		if p.major() >= 18 {
			// Reads in the backend itself, not handed to I/O worker
			// processes (18's default): a test's small reads then cost no
			// wakeup of another process, and each instance runs 3
			// processes fewer (11 instances of a pool: 33).
			settings["io_method"] = "sync"
		}
	}
	if spec.Password != "" || len(spec.Closed) > 0 {
		// TCP logins need the instance's password; the unix socket (in a
		// 0700 dir) stays trusted for the server user and root.
		hba, err := writeHBA(spec)
		if err != nil {
			return nil, err
		}
		settings["hba_file"] = hba
	}
	if err := p.CheckSettings(spec.Settings); err != nil {
		return nil, err
	}
	for k, v := range spec.Settings {
		settings[k] = v
	}
	argv := []string{p.bin("postgres"), "-D", spec.DataDir}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		argv = append(argv, "-c", k+"="+settings[k])
	}
	if fi, err := os.Stat(spec.LogFile); err == nil && fi.Size() > 0 {
		_ = os.Truncate(spec.LogFile, 0) // the tail must be this attempt's
	}
	srv, err := engine.LaunchWrapped(spec.Wrap, argv, engine.BaseEnv(), spec.User, spec.LogFile)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	srv.Engine, srv.Port, srv.SocketDir = "postgres", port, spec.SocketDir
	srv.Database, srv.User, srv.DataDir = spec.Database, spec.Owner, spec.DataDir
	srv.Listen = spec.Listen
	if spec.OnLaunch != nil {
		if err := spec.OnLaunch(srv); err != nil {
			return srv, err
		}
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if spec.Wrap == nil && p.major() >= 10 { // the data dir is in our mount namespace
		waitPIDFileReady(ctx, srv, deadline)
	}
	wait := max(time.Until(deadline), time.Second) // one deadline for both waits
	c, err := engine.WaitReady(ctx, srv, wait, func(ctx context.Context) (*pgx.Conn, error) { return ready(ctx, srv) })
	if err != nil {
		return srv, err
	}
	defer c.Close(context.Background())
	if spec.Password != "" {
		// On the connection that proved the server ready: one connection
		// less per start.
		secret, err := scramVerifier(spec.Password)
		if err != nil {
			return srv, fmt.Errorf("set instance password: %w", err)
		}
		if _, err := c.Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", pgx.Identifier{srv.User}.Sanitize(), literal(secret))); err != nil {
			return srv, fmt.Errorf("set instance password: %w", err)
		}
		srv.Password = spec.Password
	}
	return srv, nil
}

// ready connects and runs `SELECT 1`, returning the connection.
func ready(ctx context.Context, srv *engine.Server) (*pgx.Conn, error) {
	c, err := connect(ctx, srv, "postgres")
	if err != nil {
		return nil, err
	}
	var one int
	if err := c.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

func connect(ctx context.Context, srv *engine.Server, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = srv.SocketDir, uint16(srv.Port), srv.User, db
	cfg.ConnectTimeout = 5 * time.Second
	cfg.RuntimeParams = map[string]string{"application_name": "dbfork"}
	return pgx.ConnectConfig(ctx, cfg)
}

// Stop shuts the server down. clean=true is a fast shutdown (SIGINT: roll
// back sessions, checkpoint), which golden builds need; clean=false is an
// immediate shutdown (SIGQUIT) for clones about to be thrown away.
func (p *Postgres) Stop(ctx context.Context, srv *engine.Server, clean bool) error {
	dropAdmin(srv)
	return engine.StopRecorded(ctx, srv, clean)
}

// CheckCleanShutdown reads the cluster state from global/pg_control, so
// that no clone ever starts with crash recovery. The state is the fourth
// field (after the system identifier, the pg_control and catalog
// versions) in every release since 9.x; 1 is "shut down". Reading it
// needs no pg_controldata, which fetched server builds lack.
func (p *Postgres) CheckCleanShutdown(ctx context.Context, dataDir, _ string) error {
	f, err := os.Open(filepath.Join(dataDir, "global", "pg_control"))
	if err != nil {
		return fmt.Errorf("read cluster state: %w", err)
	}
	defer f.Close()
	var head [20]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return fmt.Errorf("read cluster state: %w", err)
	}
	state := binary.NativeEndian.Uint32(head[16:20])
	if state != dbShutdowned {
		name := fmt.Sprintf("state %d", state)
		if int(state) < len(dbStates) {
			name = dbStates[state]
		}
		return errors.New("cluster state after stop is " + name + ", not shut down")
	}
	return nil
}

// dbStates are pg_control's DBState values, in order.
var dbStates = []string{"starting up", "shut down", "shut down in recovery", "shutting down",
	"in crash recovery", "in archive recovery", "in production"}

const dbShutdowned = 1

// plainName: lower-case letters, digits and '_', not a keyword of
// pg_hba.conf's database field; written there as it is.
func plainName(db string) bool {
	switch db {
	case "", "all", "sameuser", "samerole", "samegroup", "replication":
		return false
	}
	for _, c := range db {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func writeHBA(spec engine.StartSpec) (string, error) {
	if spec.RunDir == "" {
		return "", errors.New("a password or closed databases need StartSpec.RunDir for pg_hba.conf")
	}
	p := filepath.Join(spec.RunDir, "pg_hba.conf")
	body := "# written by dbfork for this instance\n"
	if len(spec.Closed) > 0 {
		for _, db := range spec.Closed {
			if !plainName(db) {
				return "", fmt.Errorf("database name %q cannot be closed in pg_hba.conf", db)
			}
		}
		list := strings.Join(spec.Closed, ",")
		body += "# the golden's slots: no one hands them out from this instance (only dbfork serve does)\n" +
			"local " + list + " all reject\n" +
			"host " + list + " all all reject\n"
	}
	body += "local all all trust\n"
	if spec.Password != "" {
		body += "host all all 127.0.0.1/32 scram-sha-256\n"
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		return "", err
	}
	return p, spec.User.Chown(p)
}

// waitPIDFileReady waits until the postmaster says in postmaster.pid that
// it accepts connections (line 8, "ready", PostgreSQL 10 and later), the
// server exits, or deadline passes; WaitReady then connects once. Reading
// a small file every millisecond costs nothing, where each early
// connection attempt forks a backend that only answers "the database
// system is starting up", taking CPU from the startup it waits for.
func waitPIDFileReady(ctx context.Context, srv *engine.Server, deadline time.Time) {
	path := filepath.Join(srv.DataDir, "postmaster.pid")
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for time.Now().Before(deadline) && !srv.Exited() {
		if b, err := readSmallFile(path); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && strings.TrimSpace(lines[0]) == strconv.Itoa(srv.Process.PID) {
				switch strings.TrimSpace(lines[7]) {
				case "ready":
					return
				case "stopping":
					return // WaitReady reports it
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readSmallFile reads up to 1 KiB of a regular file in a dir the server
// user owns, never following a symlink nor blocking on a FIFO it put
// there.
func readSmallFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	buf := make([]byte, 1024)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}
