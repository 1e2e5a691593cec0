package enginetest_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// MariaDB goldens of the same recipe hold the same table files, and one
// more row (one more INSERT) in a seed table loaded first leaves the file
// of the table loaded after it byte for byte as it was, though every page
// of it was written at another log position by another transaction
// (issue 15: a push then re-sends only the changed table). The seal
// stamps every page's LSN to one value and resets the rows' transaction
// ids; clones of a stamped golden check clean, take writes and recover
// from a crash.
func TestMariaDBStableTableFiles(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	eng, err := mysql.New(ctx, mysql.MariaDB, "", "")
	if err != nil {
		t.Skipf("MariaDB: %v", err) // TestMariaDB fails loudly where CI has it
	}
	root := testenv.Dir(t)
	one, two := openStores(t, root)
	g1 := buildTwoTables(t, eng, one, filepath.Join(root, "p1"), false)
	g2 := buildTwoTables(t, eng, two, filepath.Join(root, "p2"), false)
	g3 := buildTwoTables(t, eng, one, filepath.Join(root, "p3"), true)
	for _, f := range []string{"shop/first.ibd", "shop/second.ibd"} {
		if !sameFile(t, g1, g2, f) {
			t.Errorf("two builds of one recipe differ in %s", f)
		}
	}
	if !sameFile(t, g1, g3, "shop/second.ibd") {
		t.Error("one more row in the first table changed the file of the second, loaded after it")
	}
	if sameFile(t, g1, g3, "shop/first.ibd") {
		t.Fatal("the changed table's file did not change: the test proves nothing")
	}
	if log, _ := os.ReadFile(filepath.Join(g1.Dir, "seal.log")); !bytes.Contains(log, []byte("pages stamped")) ||
		bytes.Contains(log, []byte("(transaction ids reset in 0)")) || bytes.Contains(log, []byte("transaction ids kept")) {
		t.Fatalf("seal.log does not say pages were stamped and transaction ids reset:\n%s", log)
	}
	if tool, err := exec.LookPath("innochecksum"); err == nil {
		for _, f := range []string{"shop/first.ibd", "shop/second.ibd"} {
			if out, err := exec.Command(tool, filepath.Join(g1.DataDir(), f)).CombinedOutput(); err != nil {
				t.Fatalf("innochecksum %s: %v\n%s", f, err, out)
			}
		}
	}

	in, db := copyClone(t, eng, one, g1, "mysql", "MYSQL_GO_DSN")
	checkTables(t, db)
	snapshotSeesOldRows(t, db)
	writeAndCount(t, db)
	checkTables(t, db)
	db.Close()
	if err := in.Destroy(ctx, one); err != nil {
		t.Fatal(err)
	}
	crashAndRecover(t, eng, one, g1, filepath.Join(root, "crash"), crashDrill{
		open:  func(t *testing.T, srv *engine.Server) *sql.DB { return rootDB(t, eng, srv) },
		write: writeAndCount, recovery: "crash recovery", check: checkTables})
}

// buildTwoTables loads table first (30,000 rows; extra: one more, in an
// INSERT of its own), then table second (20,000 rows).
func buildTwoTables(t *testing.T, eng engine.Engine, s *store.Store, proj string, extra bool) *golden.Golden {
	t.Helper()
	table := func(name string, rows int) string {
		return fmt.Sprintf("CREATE TABLE %[1]s(id int PRIMARY KEY, k int NOT NULL, c char(100) NOT NULL, KEY k_%[1]s(k));\n"+
			"INSERT INTO %[1]s SELECT seq, seq * 7919 %% 10000, md5(seq) FROM seq_1_to_%[2]d;\n", name, rows)
	}
	first := table("first", 30000)
	if extra {
		first += "INSERT INTO first VALUES (30001, 1, 'extra');\n"
	}
	return buildRecipe(t, eng, s, proj, "engine = \"mariadb\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"first.sql\"]\n[[load]]\nsql = [\"second.sql\"]\n",
		map[string]string{"first.sql": first, "second.sql": table("second", 20000)})
}

func sameFile(t *testing.T, a, b *golden.Golden, rel string) bool {
	t.Helper()
	x, err := os.ReadFile(filepath.Join(a.DataDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(filepath.Join(b.DataDir(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

func checkTables(t *testing.T, db *sql.DB) {
	t.Helper()
	checkTablesNamed(t, db, "first", "second")
}

// checkTablesNamed runs CHECK TABLE … EXTENDED on tables: every one OK.
func checkTablesNamed(t *testing.T, db *sql.DB, tables ...string) {
	t.Helper()
	rows, err := db.Query("CHECK TABLE " + strings.Join(tables, ", ") + " EXTENDED")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var table, op, typ, text string
		if err := rows.Scan(&table, &op, &typ, &text); err != nil {
			t.Fatal(err)
		}
		if typ == "status" {
			n++
			if text != "OK" {
				t.Errorf("CHECK TABLE %s: %s", table, text)
			}
		} else if typ == "error" {
			t.Errorf("CHECK TABLE %s: %s %s", table, typ, text)
		}
	}
	if err := rows.Err(); err != nil || n != len(tables) {
		t.Fatalf("CHECK TABLE: %d statuses, %v", n, err)
	}
}

// snapshotSeesOldRows: a REPEATABLE READ snapshot taken before another
// session's update still reads the rows as loaded, through the secondary
// index whose pages' PAGE_MAX_TRX_ID the seal lowered.
func snapshotSeesOldRows(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	countK := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		var n int
		if err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM second FORCE INDEX (k_second) WHERE k = 4242").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := countK(tx)
	if _, err := db.ExecContext(ctx, "UPDATE second SET k = 4242 WHERE id <= 3000"); err != nil {
		t.Fatal(err)
	}
	if n := countK(tx); n != before {
		t.Fatalf("the snapshot saw %d rows with k = 4242, then %d after another session's update", before, n)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := countK(db); n <= before {
		t.Fatalf("after the update %d rows have k = 4242, before %d", n, before)
	}
	if _, err := db.ExecContext(ctx, "UPDATE second SET k = id * 7919 % 10000 WHERE id <= 3000"); err != nil {
		t.Fatal(err)
	}
}

// writeAndCount changes both tables through both indexes and reads the
// result back.
func writeAndCount(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"UPDATE first SET k = k + 100000 WHERE id % 3 = 0",
		"DELETE FROM second WHERE id <= 1000",
		"INSERT INTO second SELECT seq, 1, 'new' FROM seq_100001_to_105000",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var moved, total, ones int
	if err := db.QueryRow("SELECT COUNT(*) FROM first WHERE k >= 100000").Scan(&moved); err != nil || moved != 10000 {
		t.Fatalf("rows moved in first's index: %d (%v), want 10000", moved, err)
	}
	if err := db.QueryRow("SELECT COUNT(*), SUM(k = 1) FROM second").Scan(&total, &ones); err != nil || total != 24000 {
		t.Fatalf("second holds %d rows (%v), want 24000", total, err)
	}
	if ones < 5000 {
		t.Fatalf("second has %d rows with k = 1, want at least the 5000 inserted", ones)
	}
}

// crashDrill says how one engine's crash test goes: how to connect to a
// server, what to write, what its log says when it recovers, and what to
// check afterwards.
type crashDrill struct {
	open     func(t *testing.T, srv *engine.Server) *sql.DB
	write    func(t *testing.T, db *sql.DB)
	recovery string // in the server log of a start that recovered
	check    func(t *testing.T, db *sql.DB)
}

// crashAndRecover starts a durable server on a copy of the golden, writes,
// stops it without a checkpoint (MariaDB: SIGKILL; PostgreSQL: immediate
// shutdown) and starts it again: recovery replays the writes onto the
// stamped pages, and first keeps the rows the writes moved.
func crashAndRecover(t *testing.T, eng engine.Engine, s *store.Store, g *golden.Golden, dir string, d crashDrill) {
	t.Helper()
	ctx := context.Background()
	spec := copyGolden(t, s, g, dir)
	spec.Profile, spec.Database, spec.Owner = engine.ProfileSafe, "shop", "app"
	srv, err := eng.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !srv.Exited() {
			_ = eng.Stop(context.Background(), srv, false)
		}
	})
	db := d.open(t, srv)
	d.write(t, db)
	db.Close()
	if err := eng.Stop(ctx, srv, false); err != nil {
		t.Fatal(err)
	}
	if srv, err = eng.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(spec.LogFile); !strings.Contains(string(log), d.recovery) {
		t.Fatalf("the second start did not recover (no %q in its log):\n%s", d.recovery, engine.Tail(string(log), 20))
	}
	db = d.open(t, srv)
	defer db.Close()
	d.check(t, db)
	var moved int
	if err := db.QueryRow("SELECT COUNT(*) FROM first WHERE k >= 100000").Scan(&moved); err != nil || moved != 10000 {
		t.Fatalf("after recovery, first has %d moved rows (%v), want 10000", moved, err)
	}
	if err := eng.Stop(ctx, srv, true); err != nil {
		t.Fatal(err)
	}
}

// rootDB connects to a MariaDB server as root over its socket.
func rootDB(t *testing.T, eng engine.Engine, srv *engine.Server) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", "root@unix("+eng.Conn(srv).Env["MYSQL_UNIX_PORT"]+")/shop")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openStores opens two empty stores under root.
func openStores(t *testing.T, root string) (*store.Store, *store.Store) {
	t.Helper()
	var out [2]*store.Store
	for i, name := range []string{"one", "two"} {
		s, err := store.Open(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		out[i] = s
	}
	return out[0], out[1]
}

// copyClone makes a copy-backend instance of g and connects to it with
// driver through the DSN its connection description (URL, or env[dsnEnv]
// when set) gives.
func copyClone(t *testing.T, eng engine.Engine, s *store.Store, g *golden.Golden, driver, dsnEnv string) (*instance.Instance, *sql.DB) {
	t.Helper()
	in, err := instance.Create(context.Background(), s, eng, g, instance.Options{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Destroy(context.Background(), s) })
	dsn := in.State.Conn.URL
	if dsnEnv != "" {
		dsn = in.State.Conn.Env[dsnEnv]
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return in, db
}
