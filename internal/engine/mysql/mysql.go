package mysql

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// Engine is a located MariaDB or MySQL installation.
type Engine struct {
	Bin *Binaries
}

// New locates the server for engine = "mariadb" or "mysql".
func New(ctx context.Context, flavor Flavor, bindir, want string) (*Engine, error) {
	b, err := Locate(ctx, flavor, bindir, want)
	if err != nil {
		return nil, err
	}
	return &Engine{Bin: b}, nil
}

// NewAt uses the install rooted at basedir (a fetched build).
func NewAt(ctx context.Context, flavor Flavor, basedir string) (*Engine, error) {
	b, err := LocateAt(ctx, flavor, basedir)
	if err != nil {
		return nil, err
	}
	return &Engine{Bin: b}, nil
}

func (e *Engine) Name() string { return string(e.Bin.Info.Flavor) }

func (e *Engine) Version(ctx context.Context) (string, error) { return e.Bin.Info.Line, nil }

func (e *Engine) InitOptions(c engine.Cluster) map[string]string {
	return map[string]string{
		"database": c.Database, "owner": c.Owner,
		"layout": strings.Join(innodbLayout(e.Bin.Info, false), " "),
	}
}

// PIDFile is where servers started by dbfork write their PID.
func (e *Engine) PIDFile(dataDir string) string { return filepath.Join(dataDir, "dbfork-server.pid") }

// Init creates a data dir with the server's own tool, as the server user.
func (e *Engine) Init(ctx context.Context, spec engine.InitSpec) error {
	if spec.Cluster.Owner == "root" {
		return errs.Invalid("owner = \"root\" is reserved on %s; name another owner in dbfork.toml", e.Name())
	}
	tool := e.Bin.Install
	if e.Bin.Info.Flavor == MySQL {
		tool = e.Bin.Server
	}
	// A private tmpdir: concurrent bootstraps sharing /tmp collide on the
	// names of their internal temporary tables.
	tmp, err := privateTmp(filepath.Dir(spec.DataDir), spec.User)
	if err != nil {
		return err
	}
	args := append(initArgs(e.Bin.Info, spec.DataDir), "--tmpdir="+tmp)
	if e.Bin.Basedir != "" {
		args = append(args, "--basedir="+e.Bin.Basedir)
	}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = engine.BaseEnv()
	cmd.Dir = filepath.Dir(spec.DataDir)
	cmd.SysProcAttr = engine.RunAs(spec.User)
	out, err := cmd.CombinedOutput()
	if spec.LogFile != "" {
		_ = os.WriteFile(spec.LogFile, out, 0o640)
	}
	if err != nil {
		return fmt.Errorf("%s failed: %v\n%s", filepath.Base(tool), err, errorLines(string(out), 8))
	}
	return nil
}

// Setup creates the recipe's database and owner and removes the root
// accounts that would accept TCP logins without a password.
func (e *Engine) Setup(ctx context.Context, srv *engine.Server, r engine.Build) error {
	db, err := open(ctx, srv, "root", "")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT Host FROM mysql.user WHERE User = 'root' AND Host <> 'localhost'")
	if err != nil {
		return fmt.Errorf("list root accounts: %w", err)
	}
	var drops []string
	for rows.Next() {
		var host string
		if err := rows.Scan(&host); err != nil {
			rows.Close()
			return err
		}
		drops = append(drops, "DROP USER 'root'@'"+strings.ReplaceAll(host, "'", "''")+"'")
	}
	rows.Close()
	stmts := append(drops, lockedUserSQL(r.Owner, r.Database)...)
	if srv.Password != "" {
		stmts = append(stmts, unlockSQL(r.Owner, srv.Password))
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("set up database and owner: %s: %w", q, err)
		}
	}
	return nil
}

// Finish asks for a slow shutdown: full purge and change buffer merge, so
// no clone starts with background work pending.
func (e *Engine) Finish(ctx context.Context, srv *engine.Server, r engine.Build) error {
	db, err := open(ctx, srv, "root", "")
	if err != nil {
		return err
	}
	defer db.Close()
	// Clones get their own password; the build's must not live on.
	relock := fmt.Sprintf("ALTER USER %s@'127.0.0.1' IDENTIFIED BY '' ACCOUNT LOCK", quoteIdent(r.Owner))
	for _, q := range []string{relock, "SET GLOBAL innodb_fast_shutdown = 0"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("finish golden: %w", err)
		}
	}
	return nil
}

func (e *Engine) Conn(srv *engine.Server) engine.Conn {
	sock := socketPath(srv.SocketDir)
	u := url.URL{Scheme: "mysql", Host: fmt.Sprintf("127.0.0.1:%d", srv.Port), Path: "/" + srv.Database}
	goDSN := fmt.Sprintf("%s@tcp(127.0.0.1:%d)/%s", srv.User, srv.Port, srv.Database)
	if srv.Password != "" {
		u.User = url.UserPassword(srv.User, srv.Password)
		goDSN = fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s", srv.User, srv.Password, srv.Port, srv.Database)
	} else {
		u.User = url.User(srv.User)
	}
	env := map[string]string{
		"DATABASE_URL":    u.String(),
		"MYSQL_HOST":      "127.0.0.1",
		"MYSQL_PORT":      fmt.Sprint(srv.Port),
		"MYSQL_TCP_PORT":  fmt.Sprint(srv.Port), // what the mysql client itself reads
		"MYSQL_USER":      srv.User,
		"MYSQL_DATABASE":  srv.Database,
		"MYSQL_UNIX_PORT": sock,
		"MYSQL_GO_DSN":    goDSN,
	}
	if srv.Password != "" {
		env["MYSQL_PWD"] = srv.Password
	}
	if srv.Listen {
		env["MYSQL_HOME"] = clientDir(srv) // my.cnf: user, host, port, database
	}
	if e.Bin.Basedir != "" {
		env[engine.ClientBinEnv] = filepath.Dir(e.Bin.Client)
	}
	socketURL := fmt.Sprintf("mysql://%s@localhost/%s?socket=%s", srv.User, srv.Database, url.QueryEscape(sock))
	c := engine.Conn{URL: u.String(), SocketURL: socketURL, Env: env}
	if !srv.Listen {
		// A build server listens on its socket only.
		c.URL = socketURL
		env["DATABASE_URL"], env["MYSQL_HOST"] = socketURL, "localhost"
		env["MYSQL_GO_DSN"] = fmt.Sprintf("%s@unix(%s)/%s", srv.User, sock, srv.Database)
		delete(env, "MYSQL_PORT")
		delete(env, "MYSQL_TCP_PORT")
	}
	return c
}

func socketPath(dir string) string { return filepath.Join(dir, "mysqld.sock") }

// errorLines picks the lines of a tool's output that say what went wrong
// (install-db buries them above a page of generic advice).
func errorLines(out string, n int) string {
	var picked []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "ERROR") || strings.Contains(l, "[Error]") || strings.Contains(l, "FATAL") {
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 {
		return engine.Tail(out, n)
	}
	if len(picked) > n {
		picked = picked[:n]
	}
	return strings.Join(picked, "\n")
}

// privateTmp makes dir/tmp for a server's temporary files, owned by u.
func privateTmp(dir string, u caller.User) (string, error) {
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return "", err
	}
	return tmp, u.Chown(tmp)
}

var (
	_ engine.Engine = (*Engine)(nil)
	_ engine.Loader = (*Engine)(nil)
)
