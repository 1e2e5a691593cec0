package golden_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// withServer runs fn against a server on a plain copy of a golden.
func withServer(t *testing.T, pg *postgres.Postgres, goldenData string, s *store.Store, db string, fn func(env []string)) {
	t.Helper()
	work := testenv.Dir(t)
	data := filepath.Join(work, "data")
	if err := (backend.Copy{}).Prepare(context.Background(), goldenData, data, ""); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(work, "sock")
	if err := os.Mkdir(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = s.User.Chown(sock)
	srv, err := pg.Start(context.Background(), engine.StartSpec{
		DataDir: data, SocketDir: sock, LogFile: filepath.Join(work, "log"),
		Profile: engine.ProfileTest, User: s.User, Database: db, Owner: "shop",
	})
	if srv != nil {
		defer pg.Stop(context.Background(), srv, false)
	}
	if err != nil {
		t.Fatal(err)
	}
	env := os.Environ()
	for k, v := range pg.Conn(srv).Env {
		env = append(env, k+"="+v)
	}
	fn(env)
}

func dumpGolden(t *testing.T, pg *postgres.Postgres, goldenData string, s *store.Store, plain, custom string) {
	if err := os.MkdirAll(filepath.Dir(plain), 0o755); err != nil {
		t.Fatal(err)
	}
	withServer(t, pg, goldenData, s, "shop", func(env []string) {
		for _, args := range [][]string{{"-Fp", "-f", plain}, {"-Fc", "-f", custom}} {
			cmd := exec.Command(filepath.Join(pg.Bindir, "pg_dump"), append(args, "--no-owner")...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("pg_dump: %v: %s", err, out)
			}
		}
	})
}

func countRows(t *testing.T, pg *postgres.Postgres, goldenData string, s *store.Store, db string) int {
	n := -1
	withServer(t, pg, goldenData, s, db, func(env []string) {
		cmd := exec.Command(filepath.Join(pg.Bindir, "psql"), "-XAtc", "select count(*) from items")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("psql: %v: %s", err, out)
		}
		fmt.Sscan(strings.TrimSpace(string(out)), &n)
	})
	return n
}
