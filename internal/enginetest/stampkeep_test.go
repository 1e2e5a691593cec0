package enginetest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// What the MariaDB seal must not reset: the rows of a transaction a
// recipe left PREPAREd (XA; it survives the slow shutdown and must stay
// invisible and locked), and rows whose key is a column prefix (the
// record stores the prefix, so the column's length would point the reset
// into the row's data).
func TestMariaDBStampingKeepsWhatItMust(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	eng, err := mysql.New(ctx, mysql.MariaDB, "", "")
	if err != nil {
		t.Skipf("MariaDB: %v", err) // TestMariaDB fails loudly where CI has it
	}
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	build := func(proj, seed string) *golden.Golden {
		return buildRecipe(t, eng, s, filepath.Join(root, proj), "engine = \"mariadb\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"seed.sql\"]\n",
			map[string]string{"seed.sql": seed})
	}

	xa := build("xa", "CREATE TABLE x(id int PRIMARY KEY, v int NOT NULL, KEY v(v));\n"+
		"INSERT INTO x SELECT seq, seq FROM seq_1_to_100;\n"+
		"XA START 'left';\nINSERT INTO x VALUES (1000, 1000);\nXA END 'left';\nXA PREPARE 'left';\n")
	if log, _ := os.ReadFile(filepath.Join(xa.Dir, "seal.log")); !strings.Contains(string(log), "transaction ids kept") {
		t.Fatalf("a golden with a prepared XA transaction had its ids reset:\n%s", log)
	}
	_, db := copyClone(t, eng, s, xa, "mysql", "MYSQL_GO_DSN")
	var n, byIndex int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), (SELECT COUNT(*) FROM x FORCE INDEX (v) WHERE v = 1000) FROM x").Scan(&n, &byIndex); err != nil || n != 100 || byIndex != 0 {
		t.Fatalf("the prepared row: %d rows, %d found by index (%v); want 100 and 0", n, byIndex, err)
	}

	prefix := build("prefix", "CREATE TABLE p(b binary(16) NOT NULL, c int NOT NULL, PRIMARY KEY (b(8)));\n"+
		"INSERT INTO p SELECT UNHEX(MD5(seq)), seq FROM seq_1_to_5000;\n")
	_, db = copyClone(t, eng, s, prefix, "mysql", "MYSQL_GO_DSN")
	var rows, wrong int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*), SUM(b <> UNHEX(MD5(c))) FROM p").Scan(&rows, &wrong); err != nil || rows != 5000 || wrong != 0 {
		t.Fatalf("prefix-key table after the seal: %d rows, %d with changed data (%v)", rows, wrong, err)
	}
	checkTablesNamed(t, db, "p")
}
