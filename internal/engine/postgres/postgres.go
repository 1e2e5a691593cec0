package postgres

import (
	"context"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// Postgres is a located PostgreSQL installation.
type Postgres struct {
	Bindir       string // server binaries (postgres, initdb)
	ClientBindir string // psql, pg_restore (the server's own when it has them)
	clientMajor  int
	// exportClient puts ClientBindir into connection envs (fetched
	// servers: the system's psql on PATH may not be the right one).
	exportClient bool
	version      string
}

// New locates binaries for a recipe (bindir, version).
func New(ctx context.Context, bindir, want string) (*Postgres, error) {
	dir, v, err := Locate(ctx, bindir, want)
	if err != nil {
		return nil, err
	}
	client, cmajor, err := ClientDir(ctx, dir, serverMajor(v), nil)
	if err != nil {
		return nil, err
	}
	return &Postgres{Bindir: dir, ClientBindir: client, clientMajor: cmajor, version: v}, nil
}

// NewAt uses the server in bindir as it is (a fetched build); client
// tools come from there or the newest of clientDirs and the system's.
func NewAt(ctx context.Context, bindir string, clientDirs []string) (*Postgres, error) {
	if !hasAll(bindir, needed) {
		return nil, errs.MissingTool("no PostgreSQL server binaries (%s) in %s", strings.Join(needed, ", "), bindir)
	}
	if err := engine.TrustedBinaries(bindir, needed); err != nil {
		return nil, errs.Invalid("%w", err)
	}
	v, err := serverVersion(ctx, bindir)
	if err != nil {
		return nil, err
	}
	client, cmajor, err := ClientDir(ctx, bindir, serverMajor(v), clientDirs)
	if err != nil {
		return nil, err
	}
	return &Postgres{Bindir: bindir, ClientBindir: client, clientMajor: cmajor, version: v, exportClient: true}, nil
}

func serverMajor(v string) int {
	n, _ := strconv.Atoi(majorOf(v))
	return n
}

func (p *Postgres) Name() string { return "postgres" }

// BuildSettings make a golden's files depend on its data, not on timing,
// so a rebuild after a change to one input leaves the other tables'
// files byte-identical and an OCI push re-sends only what changed:
// with wal_level=minimal, tables created and loaded in one transaction
// (pgbench -i, pg_restore --single-transaction, COPY after CREATE/TRUNCATE)
// skip WAL, so their pages carry no WAL position, and no standby snapshot
// is logged every 15 s; autovacuum would rewrite pages at times of its own
// choosing. Durability is unchanged (fsync stays on). Clones never get these.
func (p *Postgres) BuildSettings() map[string]string {
	return map[string]string{"wal_level": "minimal", "max_wal_senders": "0", "autovacuum": "off"}
}

func (p *Postgres) Version(ctx context.Context) (string, error) { return p.version, nil }

func (p *Postgres) bin(name string) string {
	for _, c := range clientTools {
		if c == name {
			return filepath.Join(p.ClientBindir, name)
		}
	}
	return filepath.Join(p.Bindir, name)
}

// walSegMB is the WAL segment size of goldens. A clone recycles the
// golden's segments, and on OverlayFS the first write to one copies the
// whole file up: 1 MiB instead of the 16 MiB default keeps that cheap.
const walSegMB = "1"

func (p *Postgres) InitOptions(c engine.Cluster) map[string]string {
	return map[string]string{
		"locale": c.Locale, "encoding": c.Encoding, "superuser": c.Owner,
		"database": c.Database, "wal_segsize_mb": walSegMB, "auth": "trust",
	}
}

// Init runs initdb as the server user. --no-sync: the build fsyncs the
// whole golden once at the end.
func (p *Postgres) Init(ctx context.Context, spec engine.InitSpec) error {
	r := spec.Cluster
	cmd := exec.CommandContext(ctx, p.bin("initdb"),
		"-D", spec.DataDir, "-U", r.Owner, "--auth=trust",
		"-E", r.Encoding, "--locale="+r.Locale, "--wal-segsize="+walSegMB,
		"--no-sync", "--no-instructions")
	cmd.Env = engine.BaseEnv()
	cmd.Dir = "/"
	cmd.SysProcAttr = engine.RunAs(spec.User)
	out, err := cmd.CombinedOutput()
	if spec.LogFile != "" {
		_ = os.WriteFile(spec.LogFile, out, 0o640)
	}
	if err != nil {
		return fmt.Errorf("initdb failed: %v\n%s", err, engine.Tail(string(out), 15))
	}
	return nil
}

// Finish freezes and analyzes everything loaded, so a clone's first reads
// do not set hint bits (which dirties pages and, on OverlayFS, copies whole
// relation files up) and the planner has statistics from the start.
func (p *Postgres) Finish(ctx context.Context, srv *engine.Server, r engine.Build) error {
	c, err := connect(ctx, srv, srv.Database)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	// Clones get their own password; the build's must not live on.
	if _, err := c.Exec(ctx, "ALTER ROLE "+pgx.Identifier{r.Owner}.Sanitize()+" PASSWORD NULL"); err != nil {
		return fmt.Errorf("drop build password: %w", err)
	}
	if r.Freeze {
		stmt := "VACUUM (FREEZE, ANALYZE)"
		if p.major() >= 15 {
			if stmt, err = freezeWhatChanged(ctx, c); err != nil {
				return fmt.Errorf("vacuum freeze: %w", err)
			}
		}
		if stmt != "" {
			if _, err := c.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("vacuum freeze: %w", err)
			}
		}
	}
	_, err = c.Exec(ctx, "CHECKPOINT")
	return err
}

// changedTables lists the tables (catalogs included) a freeze and analyze
// has work in: never vacuumed in this cluster's statistics, written since
// their last vacuum or analyze, or a table with rows and a column without
// statistics (a column added with a default writes no row). A build that
// started from an intermediate golden (frozen and analyzed when it was
// kept; PostgreSQL 15 and later keep these counters across a clean
// restart) then skips the seed's tables: ANALYZE alone read 30,000 pages
// of a 1.3 GB table whose copy has a cold page cache. A full build lists
// every table it loaded. Counters lost in a crash read as "never".
const changedTables = `
SELECT format('%I.%I', s.schemaname, s.relname)
FROM pg_stat_all_tables s JOIN pg_class c ON c.oid = s.relid
WHERE c.relkind IN ('r', 'm') AND (
  (s.last_vacuum IS NULL AND s.last_autovacuum IS NULL)
  OR (s.last_analyze IS NULL AND s.last_autoanalyze IS NULL)
  OR s.n_mod_since_analyze > 0 OR s.n_ins_since_vacuum > 0 OR s.n_dead_tup > 0
  OR (c.reltuples > 0 AND EXISTS (
    SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      AND NOT EXISTS (SELECT 1 FROM pg_statistic st WHERE st.starelid = c.oid AND st.staattnum = a.attnum))))
ORDER BY 1`

// freezeWhatChanged is the VACUUM (FREEZE, ANALYZE) statement for the
// tables changedTables lists ("" for none; the whole database when every
// table is listed, as in a full build).
func freezeWhatChanged(ctx context.Context, c *pgx.Conn) (string, error) {
	var total int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_all_tables s JOIN pg_class c ON c.oid = s.relid WHERE c.relkind IN ('r', 'm')").Scan(&total); err != nil {
		return "", err
	}
	rows, err := c.Query(ctx, changedTables)
	if err != nil {
		return "", err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	switch {
	case len(names) == 0:
		return "", nil
	case len(names) >= total:
		return "VACUUM (FREEZE, ANALYZE)", nil
	}
	return "VACUUM (FREEZE, ANALYZE) " + strings.Join(names, ", "), nil
}

func (p *Postgres) Conn(srv *engine.Server) engine.Conn {
	env := map[string]string{
		"PGHOST":     srv.SocketDir,
		"PGPORT":     fmt.Sprint(srv.Port),
		"PGUSER":     srv.User,
		"PGDATABASE": srv.Database,
	}
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", srv.User, srv.Port, srv.Database)
	if srv.Password != "" {
		env["PGPASSWORD"] = srv.Password
		url = fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", srv.User, srv.Password, srv.Port, srv.Database)
	}
	socketURL := fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d", srv.User, srv.Database, neturl.QueryEscape(srv.SocketDir), srv.Port)
	if !srv.Listen {
		url = socketURL // a build server has no TCP listener
	}
	env["DATABASE_URL"] = url
	if p.exportClient {
		env[engine.ClientBinEnv] = p.ClientBindir
	}
	return engine.Conn{URL: url, SocketURL: socketURL, Env: env}
}

// Setup creates the recipe's database, owned by the recipe's owner (the
// cluster's bootstrap superuser, see Init).
func (p *Postgres) Setup(ctx context.Context, srv *engine.Server, r engine.Build) error {
	if r.Database == "postgres" {
		return nil
	}
	c, err := connect(ctx, srv, "postgres")
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{r.Database}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", r.Database, err)
	}
	return nil
}

// PIDFile is postgres's own postmaster.pid.
func (p *Postgres) PIDFile(dataDir string) string { return filepath.Join(dataDir, "postmaster.pid") }

var (
	_ engine.Engine = (*Postgres)(nil)
	_ engine.Loader = (*Postgres)(nil)
)
