package enginetest_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/mysql"
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
	root := testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	path := testenv.WriteRecipe(t, filepath.Join(root, "p"), "engine = \"mariadb\"\ndatabase = \"shop\"\n[[load]]\nsql = [\"seed.sql\"]\n",
		map[string]string{"seed.sql": "CREATE TABLE items(id int AUTO_INCREMENT PRIMARY KEY, name text NOT NULL);\nINSERT INTO items(name) SELECT CONCAT('item ', seq) FROM seq_1_to_1000;\n"})
	r, err := recipe.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(ctx, s, eng, r, golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	size, owned := sizeAndOwned(t, filepath.Join(res.Golden.DataDir(), "ib_logfile0"))
	if size != 256<<20 || owned > 1<<20 {
		t.Fatalf("golden redo log: %d bytes long, owns %d; want 256 MiB owning < 1 MiB", size, owned)
	}
	for _, backend := range []string{"overlay", "copy"} {
		in, err := instance.Create(ctx, s, eng, res.Golden, instance.Options{Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("mysql", in.State.Conn.Env["MYSQL_GO_DSN"])
		if err != nil {
			t.Fatal(err)
		}
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

func sizeAndOwned(t *testing.T, path string) (int64, int64) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Size, st.Blocks * 512
}
