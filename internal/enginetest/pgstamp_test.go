package enginetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// The PostgreSQL side of TestMariaDBStableTableFiles, with the recipe
// shape that defeated wal_level=minimal: tables created first, loaded
// afterwards (every page WAL-logged). Two builds give identical table and
// index files; one more transaction while loading the first table leaves
// the second's files identical; clones pass amcheck, take writes, and a
// durable server on a copy recovers from a crash.
func TestPostgresStableTableFiles(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	t.Run("system", func(t *testing.T) {
		eng, err := postgres.New(ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		stableTableFiles(t, eng, false)
	})
	// PostgreSQL 18 turns data checksums on by default: every stamped
	// page's checksum is recomputed, and the server checks each page it
	// reads.
	t.Run("18", func(t *testing.T) {
		eng, err := fetched(t, engineCache(t), "postgres", "18")(ctx)
		if err != nil {
			t.Fatal(err)
		}
		stableTableFiles(t, eng, true)
	})
}

func stableTableFiles(t *testing.T, eng engine.Engine, checksums bool) {
	ctx := context.Background()
	root := testenv.Dir(t)
	one, two := openStores(t, root)
	g1 := buildPGTables(t, eng, one, filepath.Join(root, "p1"), false)
	g2 := buildPGTables(t, eng, two, filepath.Join(root, "p2"), false)
	g3 := buildPGTables(t, eng, one, filepath.Join(root, "p3"), true)

	in, db := copyClone(t, eng, one, g1, "pgx", "")
	files := map[string]string{} // relation → file, from the clone's catalog
	for _, rel := range []string{"first", "first_pkey", "second", "second_pkey", "second_k_idx"} {
		var path string
		if err := db.QueryRowContext(ctx, "SELECT pg_relation_filepath($1)", rel).Scan(&path); err != nil {
			t.Fatal(err)
		}
		files[rel] = path
	}
	for rel, f := range files {
		if !sameFile(t, g1, g2, f) {
			t.Errorf("two builds of one recipe differ in %s (%s)", rel, f)
		}
		changed := !sameFile(t, g1, g3, f)
		if wantChanged := strings.HasPrefix(rel, "first"); changed != wantChanged {
			t.Errorf("%s (%s) after one more row in first: changed %v, want %v", rel, f, changed, wantChanged)
		}
	}
	var on string
	if err := db.QueryRowContext(ctx, "SHOW data_checksums").Scan(&on); err != nil || (on == "on") != checksums {
		t.Fatalf("data_checksums = %q (%v), want on: %v", on, err, checksums)
	}
	var xmin string
	if err := db.QueryRowContext(ctx, "SELECT string_agg(DISTINCT xmin::text, ',') FROM second").Scan(&xmin); err != nil || xmin != "2" {
		t.Fatalf("frozen rows of second have xmin %q (%v), want 2 (FrozenTransactionId)", xmin, err)
	}
	amcheck(t, db)
	writePG(t, db)
	amcheck(t, db)
	db.Close()
	if err := in.Destroy(ctx, one); err != nil {
		t.Fatal(err)
	}
	crashAndRecover(t, eng, one, g1, filepath.Join(root, "crash"), crashDrill{
		open: func(t *testing.T, srv *engine.Server) *sql.DB {
			db, err := sql.Open("pgx", eng.Conn(srv).URL)
			if err != nil {
				t.Fatal(err)
			}
			return db
		},
		write: writePG, recovery: "redo", check: amcheck})
}

// buildPGTables creates tables first and second, then loads first
// (30,000 rows; extra: one more, in a transaction of its own), then
// second (20,000 rows).
func buildPGTables(t *testing.T, eng engine.Engine, s *store.Store, proj string, extra bool) *golden.Golden {
	t.Helper()
	first := "INSERT INTO first SELECT g, g * 7919 % 10000, md5(g::text) FROM generate_series(1, 30000) g;\n"
	if extra {
		first += "INSERT INTO first VALUES (30001, 1, 'extra');\n"
	}
	return buildRecipe(t, eng, s, proj, "engine = \"postgres\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"schema.sql\", \"first.sql\", \"second.sql\"]\n",
		map[string]string{
			"schema.sql": "CREATE TABLE first(id int PRIMARY KEY, k int NOT NULL, c text NOT NULL);\n" +
				"CREATE TABLE second(id int PRIMARY KEY, k int NOT NULL, c text NOT NULL);\nCREATE INDEX second_k_idx ON second(k);\n",
			"first.sql":  first,
			"second.sql": "INSERT INTO second SELECT g, g * 7919 % 10000, md5(g::text) FROM generate_series(1, 20000) g;\n",
		})
}

// amcheck runs PostgreSQL's own checks of heap and B-tree structure on
// both tables, their indexes and the catalogs.
func amcheck(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS amcheck"); err != nil {
		t.Fatal(err)
	}
	var bad int
	q := `SELECT (SELECT count(*) FROM verify_heapam('first')) + (SELECT count(*) FROM verify_heapam('second'))
		+ (SELECT count(*) FROM verify_heapam('pg_class')) + (SELECT count(*) FROM verify_heapam('pg_attribute'))`
	if err := db.QueryRowContext(ctx, q).Scan(&bad); err != nil || bad != 0 {
		t.Fatalf("verify_heapam: %d problems (%v)", bad, err)
	}
	var n int
	q = `SELECT count(bt_index_parent_check(c.oid, true)) FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
		WHERE c.relkind = 'i' AND c.relam = 403 AND c.relpersistence = 'p'`
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil || n < 100 {
		t.Fatalf("bt_index_parent_check over %d B-tree indexes: %v", n, err)
	}
}

// writePG changes both tables through their indexes and reads them back.
func writePG(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		"UPDATE first SET k = k + 100000 WHERE id % 3 = 0",
		"DELETE FROM second WHERE id <= 1000",
		"INSERT INTO second SELECT g, 1, 'new' FROM generate_series(100001, 105000) g",
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var moved, total int
	if err := db.QueryRow("SELECT count(*) FROM first WHERE k >= 100000").Scan(&moved); err != nil || moved != 10000 {
		t.Fatalf("rows moved in first: %d (%v), want 10000", moved, err)
	}
	if err := db.QueryRow("SELECT count(*) FROM second WHERE k = 1 OR id > 0").Scan(&total); err != nil || total != 24000 {
		t.Fatalf("second holds %d rows (%v), want 24000", total, err)
	}
}

// copyGolden copies g's data dir to dir/data for the server user and
// returns a start spec for it (logs and socket in dir).
func copyGolden(t *testing.T, s *store.Store, g *golden.Golden, dir string) engine.StartSpec {
	t.Helper()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "sock")
	if err := os.MkdirAll(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", g.DataDir(), data).CombinedOutput(); err != nil {
		t.Fatalf("copy the golden: %v: %s", err, out)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", s.User.UID, s.User.GID), dir).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	return engine.StartSpec{DataDir: data, SocketDir: sock, LogFile: filepath.Join(dir, "server.log"), RunDir: dir, User: s.User}
}
