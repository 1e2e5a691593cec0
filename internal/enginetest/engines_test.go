package enginetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/enginetest"
)

func TestPostgres(t *testing.T) {
	enginetest.Run(t, postgresDialect(func(ctx context.Context) (engine.Engine, error) { return postgres.New(ctx, "", "") }))
}

func postgresDialect(open func(ctx context.Context) (engine.Engine, error)) enginetest.Dialect {
	return enginetest.Dialect{
		Engine: "postgres",
		New:    open,
		Open:   func(c engine.Conn) (*sql.DB, error) { return sql.Open("pgx", c.URL) },
		Seed: func(n int) string {
			return fmt.Sprintf("CREATE TABLE items(id serial PRIMARY KEY, name text NOT NULL);\nINSERT INTO items(name) SELECT 'item ' || g FROM generate_series(1, %d) g;\n", n)
		},
		Command: `psql -v ON_ERROR_STOP=1 -qc "INSERT INTO items(name) VALUES ('cmd')"`,
		Bare:    []string{"psql", "-XAtc", "SELECT count(*) FROM items"},
		BadSQL:  "CREATE TABLE a(x int);\nINSERT INTO a VALUES (1);\nINSERT INTO nosuch\n VALUES (2);\n",
		Dump: func(t *testing.T, c engine.Conn, path string) {
			enginetest.RunCLI(t, c, "pg_dump", "-Fc", "--no-owner", "-f", path)
		},
	}
}

func TestMariaDB(t *testing.T) {
	if _, err := exec.LookPath("mariadbd"); err != nil {
		if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil && os.Getenv("CI") == "" {
			t.Skip("MariaDB is not installed (apt-get install mariadb-server); CI installs it")
		}
	}
	enginetest.Run(t, mariadbDialect(func(ctx context.Context) (engine.Engine, error) { return mysql.New(ctx, mysql.MariaDB, "", "") }))
}

func mariadbDialect(open func(ctx context.Context) (engine.Engine, error)) enginetest.Dialect {
	return enginetest.Dialect{
		Engine: "mariadb",
		New:    open,
		Open: func(c engine.Conn) (*sql.DB, error) {
			dsn := c.Env["MYSQL_GO_DSN"]
			if dsn == "" { // the wrong-password probe passes only a URL
				dsn = goDSNFromURL(c.URL)
			}
			return sql.Open("mysql", dsn)
		},
		Seed: func(n int) string {
			return fmt.Sprintf("CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text NOT NULL);\nINSERT INTO items(name) SELECT CONCAT('item ', seq) FROM seq_1_to_%d;\n", n)
		},
		// A bare client: the instance's my.cnf (MYSQL_HOME) names user, host, port and database.
		Command: `mariadb -e "INSERT INTO items(name) VALUES ('cmd')"`,
		Bare:    []string{"mariadb", "-N", "-e", "SELECT count(*) FROM items"},
		BadSQL:  "CREATE TABLE a(x int);\nINSERT INTO a VALUES (1);\nINSERT INTO nosuch\n VALUES (2);\n",
		Dump: func(t *testing.T, c engine.Conn, path string) {
			enginetest.RunCLI(t, c, "mariadb-dump", "-h", c.Env["MYSQL_HOST"], "-P", c.Env["MYSQL_PORT"], "-u", c.Env["MYSQL_USER"], "-r", path, c.Env["MYSQL_DATABASE"])
		},
	}
}

// TestMySQL runs the suite against MySQL 8 where its server is installed.
// Debian ships none, so CI cannot run it; the MySQL-only code paths are
// unit-tested in internal/engine/mysql/flavor_test.go.
func TestMySQL(t *testing.T) {
	if _, err := mysql.New(context.Background(), mysql.MySQL, os.Getenv("DBFORK_MYSQL_BINDIR"), ""); err != nil {
		t.Skipf("no MySQL server here (%v); Debian 12 packages none, so CI skips this", err)
	}
	enginetest.Run(t, enginetest.Dialect{
		Engine: "mysql",
		New: func(ctx context.Context) (engine.Engine, error) {
			return mysql.New(ctx, mysql.MySQL, os.Getenv("DBFORK_MYSQL_BINDIR"), "")
		},
		Open: func(c engine.Conn) (*sql.DB, error) {
			dsn := c.Env["MYSQL_GO_DSN"]
			if dsn == "" {
				dsn = goDSNFromURL(c.URL)
			}
			return sql.Open("mysql", dsn)
		},
		Seed: func(n int) string {
			return fmt.Sprintf("CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text NOT NULL);\nSET SESSION cte_max_recursion_depth = 10000000;\nINSERT INTO items(name) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT CONCAT('item ', n) FROM s;\n", n)
		},
		Command: `mysql -h "$MYSQL_HOST" -P "$MYSQL_PORT" -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "INSERT INTO items(name) VALUES ('cmd')"`,
		BadSQL:  "CREATE TABLE a(x int);\nINSERT INTO a VALUES (1);\nINSERT INTO nosuch\n VALUES (2);\n",
		Dump: func(t *testing.T, c engine.Conn, path string) {
			enginetest.RunCLI(t, c, "mysqldump", "-h", c.Env["MYSQL_HOST"], "-P", c.Env["MYSQL_PORT"], "-u", c.Env["MYSQL_USER"], "-r", path, c.Env["MYSQL_DATABASE"])
		},
	})
}

// The same suites as an unprivileged user: goldens built by the user,
// instances on userns-overlay, reflink, btrfs and copy.
func TestPostgresRootless(t *testing.T) {
	enginetest.RunRootless(t, "^TestPostgres$/^(driver|build|instances)$")
}

func TestMariaDBRootless(t *testing.T) {
	enginetest.RunRootless(t, "^TestMariaDB$/^(driver|build|instances)$")
}
