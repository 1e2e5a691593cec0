package postgres

import (
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/dbfork/dbfork/internal/engine"
)

// Bytes on disk per row, measured: pgbench_accounts with its primary key
// (~15.6 MB per 100 000 rows).
const benchRowBytes = 156

// BenchKit is what `dbfork bench` uses on PostgreSQL: pgbench-style
// tables, psql for single-row inserts, and CREATE DATABASE … TEMPLATE as a
// baseline.
func BenchKit() engine.BenchKit {
	return engine.BenchKit{
		Dataset: benchDataset,
		Insert: func(env map[string]string, db, table string, rows int64, i int) ([]string, []string) {
			if db == "" {
				db = env["PGDATABASE"]
			}
			sql := fmt.Sprintf("INSERT INTO %s (aid, bid, abalance, filler) VALUES (%d, 1, 0, '')", table, rows+int64(i))
			return []string{"psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", env["PGPORT"], "-U", env["PGUSER"], "-d", db, "-c", sql},
				[]string{"PGPASSWORD=" + env["PGPASSWORD"]}
		},
		Update: func(table string) string { return "UPDATE " + table + " SET abalance = abalance + 1 WHERE aid = $1" },
		OpenDB: func(url string, _ map[string]string) (*sql.DB, error) { return sql.Open("pgx", url) },

		TemplateStrategies: []string{"wal_log", "file_copy"},
		AdminDatabase:      "postgres",
		CreateFromTemplate: func(name, template, strategy string) string {
			return fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY %s", name, template, strategy)
		},
		DatabaseSize: "SELECT pg_database_size($1)",
	}
}

func benchDataset(size int64) (string, string, int64) {
	rows := size / benchRowBytes
	scale := max(1, rows/100000)
	sql := fmt.Sprintf(`CREATE TABLE pgbench_branches (bid int NOT NULL, bbalance int, filler char(88)) WITH (fillfactor=100);
CREATE TABLE pgbench_tellers (tid int NOT NULL, bid int, tbalance int, filler char(84)) WITH (fillfactor=100);
CREATE TABLE pgbench_accounts (aid bigint NOT NULL, bid int, abalance int, filler char(84)) WITH (fillfactor=100);
CREATE TABLE pgbench_history (tid int, bid int, aid bigint, delta int, mtime timestamp, filler char(22));
CREATE TABLE dbfork_bench (tag varchar(64) NOT NULL);
INSERT INTO pgbench_branches SELECT g, 0, '' FROM generate_series(1, %d) g;
INSERT INTO pgbench_tellers SELECT g, (g - 1) / 10 + 1, 0, '' FROM generate_series(1, %d) g;
INSERT INTO pgbench_accounts SELECT g, (g - 1) / 100000 + 1, 0, '' FROM generate_series(1, %d) g;
ALTER TABLE pgbench_branches ADD PRIMARY KEY (bid);
ALTER TABLE pgbench_tellers ADD PRIMARY KEY (tid);
ALTER TABLE pgbench_accounts ADD PRIMARY KEY (aid);
`, scale, scale*10, rows)
	return sql, "pgbench_accounts", rows
}
