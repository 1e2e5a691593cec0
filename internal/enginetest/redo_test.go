package enginetest_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A MariaDB golden is sealed with the clones' 256 MiB redo log, stored
// sparse: the golden owns almost none of it, clones start on it without
// resizing it, and a clone's copy (copy backend) or copy-up (OverlayFS)
// of it stays sparse too (issue 16: a 16 MiB log stalled write-heavy
// tests on forced checkpoints).
func TestMariaDBSealedRedoLog(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	eng, err := mysql.New(ctx, mysql.MariaDB, "", "")
	if err != nil {
		t.Skipf("MariaDB: %v", err) // TestMariaDB fails loudly where CI has it
	}
	s, g := buildSeed(t, eng, "mariadb", "CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text NOT NULL);\nINSERT INTO items(name) SELECT CONCAT('item ', seq) FROM seq_1_to_1000;\n")
	size, owned := sizeAndOwned(t, filepath.Join(g.DataDir(), "ib_logfile0"))
	if size != 256<<20 || owned > 1<<20 {
		t.Fatalf("golden redo log: %d bytes long, owns %d; want 256 MiB owning < 1 MiB", size, owned)
	}
	for _, backend := range []string{"overlay", "copy"} {
		in, err := instance.Create(ctx, s, eng, g, instance.Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Destroy(context.Background(), s) }) // on failure too (idempotent)
		db, err := sql.Open("mysql", in.State.Conn.Env["MYSQL_GO_DSN"])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		for i := 0; i < 200; i++ {
			if _, err := db.ExecContext(ctx, "INSERT INTO items(name) VALUES (REPEAT('x', 2000))"); err != nil {
				t.Fatal(err)
			}
		}
		var logSize int64
		if err := db.QueryRowContext(ctx, "SELECT @@innodb_log_file_size").Scan(&logSize); err != nil || logSize != 256<<20 {
			t.Fatalf("%s clone runs with innodb_log_file_size %d (%v), want 256 MiB", backend, logSize, err)
		}
		db.Close()
		if log, _ := os.ReadFile(in.State.Server.LogFile); strings.Contains(string(log), "Resizing redo log") {
			t.Fatalf("%s clone resized the golden's redo log at start:\n%s", backend, log)
		}
		if _, owned := sizeAndOwned(t, filepath.Join(in.State.DataDir, "ib_logfile0")); owned > 16<<20 {
			t.Fatalf("%s clone's redo log owns %d bytes after a few writes: the hole-free copy the seal avoids", backend, owned)
		}
		if err := in.Destroy(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
}

// buildSeed builds a golden of database shop loaded from one SQL file, in
// a new store.
func buildSeed(t *testing.T, eng engine.Engine, name, seed string) (*store.Store, *golden.Golden) {
	t.Helper()
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	g := buildRecipe(t, eng, s, filepath.Join(root, "p"), "engine = \""+name+"\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"seed.sql\"]\n",
		map[string]string{"seed.sql": seed})
	return s, g
}

// buildRecipe writes a recipe (and its files) to proj and builds its
// golden in s with eng.
func buildRecipe(t *testing.T, eng engine.Engine, s *store.Store, proj, toml string, files map[string]string) *golden.Golden {
	t.Helper()
	r, err := recipe.Load(testenv.WriteRecipe(t, proj, toml, files))
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(context.Background(), s, eng, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Golden
}

func sizeAndOwned(t *testing.T, path string) (int64, int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}

// A PostgreSQL golden keeps only the WAL segment of its shutdown
// checkpoint, mostly holes; clones start on it and write on.
func TestPostgresSealedWAL(t *testing.T) {
	testenv.RequireRoot(t)
	ctx := context.Background()
	eng, err := postgres.New(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	s, g := buildSeed(t, eng, "postgres", "CREATE TABLE items AS SELECT g AS id, md5(g::text) AS name FROM generate_series(1, 100000) g;\nUPDATE items SET name = name || 'x';\n")
	wal := filepath.Join(g.DataDir(), "pg_wal")
	entries, err := os.ReadDir(wal)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			segs = append(segs, e.Name())
		}
	}
	if len(segs) != 1 {
		t.Fatalf("golden pg_wal holds %v, want the checkpoint's segment only", segs)
	}
	if _, owned := sizeAndOwned(t, filepath.Join(wal, segs[0])); owned > 64<<10 {
		t.Fatalf("golden WAL segment owns %d bytes, want a few pages", owned)
	}
	in, err := instance.Create(ctx, s, eng, g, instance.Options{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Destroy(ctx, s)
	db, err := sql.Open("pgx", in.State.Conn.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	// Enough WAL to need new segments (1 MiB each), then a checkpoint.
	if _, err := db.ExecContext(ctx, "UPDATE items SET name = name || 'y'"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM items WHERE name LIKE '%xy'").Scan(&n); err != nil || n != 100000 {
		t.Fatalf("clone of the sealed golden: %d rows updated (%v), want 100000", n, err)
	}
}
