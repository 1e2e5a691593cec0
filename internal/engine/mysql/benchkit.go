package mysql

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
)

// Bytes on disk per row, measured: sysbench sbtest with its k index
// (~272 B), over benchTables tables.
const (
	benchRowBytes = 272
	benchTables   = 4
)

// BenchKit is what `dbfork bench` uses on MariaDB or MySQL:
// sysbench-style tables and the flavor's command-line client.
func BenchKit(f Flavor) engine.BenchKit {
	client := "mariadb"
	if f == MySQL {
		client = "mysql"
	}
	return engine.BenchKit{
		Dataset: func(size int64) (string, string, int64) { return benchDataset(f, size) },
		Insert: func(env map[string]string, _, table string, _ int64, i int) ([]string, []string) {
			sql := fmt.Sprintf("INSERT INTO %s (k, c, pad) VALUES (%d, 'x', 'y')", table, i)
			return []string{client, "--no-defaults", "-h", "127.0.0.1", "-P", env["MYSQL_PORT"], "-u", env["MYSQL_USER"], env["MYSQL_DATABASE"], "-e", sql},
				[]string{"MYSQL_PWD=" + env["MYSQL_PWD"]}
		},
		Update: func(table string) string { return "UPDATE " + table + " SET k = k + 1 WHERE id = ?" },
		OpenDB: func(_ string, env map[string]string) (*sql.DB, error) { return sql.Open("mysql", env["MYSQL_GO_DSN"]) },
	}
}

func benchDataset(f Flavor, size int64) (string, string, int64) {
	per := size / (benchTables * benchRowBytes)
	var b strings.Builder
	b.WriteString("CREATE TABLE dbfork_bench (tag varchar(64) NOT NULL) ENGINE=InnoDB;\n")
	for t := 1; t <= benchTables; t++ {
		fmt.Fprintf(&b, "CREATE TABLE sbtest%d (id int NOT NULL AUTO_INCREMENT PRIMARY KEY, k int NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '', pad char(60) NOT NULL DEFAULT '', KEY k_%d (k)) ENGINE=InnoDB;\n", t, t)
		if f == MariaDB {
			fmt.Fprintf(&b, "INSERT INTO sbtest%d (k, c, pad) SELECT seq %% 100000, REPEAT('c', 119), REPEAT('p', 59) FROM seq_1_to_%d;\n", t, per)
		} else {
			fmt.Fprintf(&b, "SET SESSION cte_max_recursion_depth = %d;\nINSERT INTO sbtest%d (k, c, pad) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < %d) SELECT n %% 100000, REPEAT('c', 119), REPEAT('p', 59) FROM s;\n", per+1, t, per)
		}
	}
	return b.String(), "sbtest1", per
}
