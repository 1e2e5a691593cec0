package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/fsutil"
)

func init() {
	// The driver logs to stderr on broken connections during start-up
	// polling; the errors are handled here.
	_ = gomysql.SetLogger(nopLogger{})
}

type nopLogger struct{}

func (nopLogger) Print(...any) {}

// Start runs the server directly (its PID is what we record). On a port
// collision it retries with another port.
func (e *Engine) Start(ctx context.Context, spec engine.StartSpec) (*engine.Server, error) {
	return engine.StartOnFreePort(spec, []string{"Address already in use", "Do you already have another"}, func(port int) (*engine.Server, error) {
		return e.startOnce(ctx, spec, port)
	})
}

func (e *Engine) argv(spec engine.StartSpec, port int) []string {
	test := spec.Profile == engine.ProfileTest
	argv := []string{e.Bin.Server, "--no-defaults",
		"--datadir=" + spec.DataDir,
		"--socket=" + socketPath(spec.SocketDir),
		"--pid-file=" + e.PIDFile(spec.DataDir),
		fmt.Sprintf("--port=%d", port),
	}
	if e.Bin.Basedir != "" {
		argv = append(argv, "--basedir="+e.Bin.Basedir)
	}
	if spec.Listen {
		argv = append(argv, "--bind-address=127.0.0.1")
	} else {
		argv = append(argv, "--skip-networking")
	}
	argv = append(argv, innodbLayout(e.Bin.Info, spec.Profile == engine.ProfileSafe)...) // safe: golden builds
	argv = append(argv, profileArgs(e.Bin.Info, test)...)
	keys := make([]string, 0, len(spec.Settings))
	for k := range spec.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		argv = append(argv, "--"+strings.ReplaceAll(k, "_", "-")+"="+spec.Settings[k])
	}
	return argv
}

func (e *Engine) startOnce(ctx context.Context, spec engine.StartSpec, port int) (*engine.Server, error) {
	if fi, err := os.Stat(spec.LogFile); err == nil && fi.Size() > 0 {
		_ = os.Truncate(spec.LogFile, 0)
	}
	if err := e.CheckSettings(spec.Settings); err != nil {
		return nil, err
	}
	argv := e.argv(spec, port)
	if spec.RunDir != "" {
		tmp, err := privateTmp(spec.RunDir, spec.User)
		if err != nil {
			return nil, err
		}
		argv = append(argv, "--tmpdir="+tmp)
	}
	srv, err := engine.LaunchWrapped(spec.Wrap, argv, engine.BaseEnv(), spec.User, spec.LogFile)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", e.Name(), err)
	}
	srv.Engine, srv.Port, srv.SocketDir = e.Name(), port, spec.SocketDir
	srv.Database, srv.User, srv.DataDir = spec.Database, spec.Owner, spec.DataDir
	srv.Listen = spec.Listen
	if spec.Listen {
		if err := writeClientConfig(srv, e.Bin.Info.Flavor); err != nil {
			return srv, err
		}
	}
	if spec.OnLaunch != nil {
		if err := spec.OnLaunch(srv); err != nil {
			return srv, err
		}
	}
	timeout := spec.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	// The connection that proved the server ready prepares it too.
	db, err := engine.WaitReady(ctx, srv, timeout, func(ctx context.Context) (*sql.DB, error) { return ready(ctx, srv) })
	if err != nil {
		return srv, err
	}
	defer db.Close()
	stmts := afterStartSQL(e.Bin.Info, spec.Profile == engine.ProfileTest)
	if spec.Password != "" {
		// A fresh build server has no owner yet: Setup creates it with
		// this password.
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '127.0.0.1'", spec.Owner).Scan(&n)
		if err != nil {
			return srv, fmt.Errorf("look up owner: %w", err)
		}
		if n > 0 {
			stmts = append(stmts, unlockSQL(spec.Owner, spec.Password))
		}
		srv.Password = spec.Password
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return srv, fmt.Errorf("prepare instance: %w", err)
		}
	}
	return srv, nil
}

// open connects over the unix socket.
func open(ctx context.Context, srv *engine.Server, user, db string) (*sql.DB, error) {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName = user, "unix", socketPath(srv.SocketDir), db
	cfg.Timeout = 5 * time.Second
	cfg.AllowNativePasswords = true
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	d := sql.OpenDB(conn)
	d.SetMaxOpenConns(1)
	return d, nil
}

// ready runs `SELECT 1` as root over the socket, once the socket
// exists, and returns that connection.
func ready(ctx context.Context, srv *engine.Server) (*sql.DB, error) {
	if _, err := os.Stat(socketPath(srv.SocketDir)); err != nil {
		return nil, errors.New("no socket yet")
	}
	db, err := open(ctx, srv, "root", "")
	if err != nil {
		return nil, err
	}
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Stop shuts the server down with SIGTERM (clean: InnoDB shuts down as
// innodb_fast_shutdown says). A clone about to be thrown away gets the
// same signal with a shorter grace before SIGKILL.
func (e *Engine) Stop(ctx context.Context, srv *engine.Server, clean bool) error {
	err := engine.StopRecorded(ctx, srv, clean)
	_ = fsutil.RemoveAll(clientDir(srv))
	return err
}

// clientDir holds the client option file of a server: beside its socket
// dir, in the instance or build dir.
func clientDir(srv *engine.Server) string {
	return filepath.Join(filepath.Dir(srv.SocketDir), "client")
}

// writeClientConfig writes CLIENT_DIR/my.cnf, which the mariadb/mysql
// command-line clients read when MYSQL_HOME (MARIADB_HOME) points there
// (Conn exports it): a bare `mariadb` in a recipe's run step or under
// `dbfork run` then reaches this server as its owner over 127.0.0.1.
// Those clients ignore MYSQL_USER and would log in as the Unix user. The
// password is not in it (MYSQL_PWD carries it), so it may be readable by
// any caller who holds the lease.
func writeClientConfig(srv *engine.Server, flavor Flavor) error {
	dir := clientDir(srv)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tls := ""
	if flavor == MariaDB {
		tls = "skip-ssl\n" // servers run without TLS; MariaDB 11.4's clients require it unless told
	}
	cnf := fmt.Sprintf("# Written by dbfork for the server on port %d; removed with it.\n[client]\nuser=%s\nhost=127.0.0.1\nport=%d\n%s\n[mysql]\ndatabase=%s\n",
		srv.Port, srv.User, srv.Port, tls, srv.Database)
	return os.WriteFile(filepath.Join(dir, "my.cnf"), []byte(cnf), 0o644)
}

// CheckCleanShutdown reads the server log: a clean stop ends with
// "Shutdown complete".
func (e *Engine) CheckCleanShutdown(ctx context.Context, dataDir string, logFile string) error {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), "Shutdown complete") {
		return errors.New("server log does not end with a clean shutdown:\n" + engine.LogTail(logFile, 10))
	}
	// Files the server must not leave in a golden.
	for _, f := range []string{"ib_buffer_pool", "dbfork-server.pid", "ibtmp1"} {
		_ = os.Remove(dataDir + "/" + f)
	}
	return nil
}
