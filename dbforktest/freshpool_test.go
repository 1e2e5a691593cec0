package dbforktest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/dbfork/dbfork/dbforktest"
	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

// An app's package-level connection (or pool), made once and kept across
// Fresh calls, must fail in the next test rather than go on quietly in a
// database that holds the tests before it, in every mode; the README's
// pattern, a connection per test from Instance.DSN, sees the golden's
// rows only.
func TestFreshKeptConnectionFailsLoudly(t *testing.T) {
	for _, mode := range []string{dbforktest.ModeReset, dbforktest.ModeSlot, dbforktest.ModeDatabase} {
		t.Run(mode, func(t *testing.T) {
			testenv.RequireRoot(t)
			storeDir, recipe := setup(t)
			b, err := os.ReadFile(recipe)
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case dbforktest.ModeSlot:
				b = append(b, "[fresh]\nslots = 3\n"...)
			case dbforktest.ModeDatabase:
				b = append([]byte(fmt.Sprintf("bindir = %q\n", testenv.PG18Bindir(t))), b...)
				storeDir = filepath.Join(testenv.LoopFS(t, "xfs", 2<<30), "store")
				t.Setenv("DBFORK_STORE", storeDir)
			}
			if err := os.WriteFile(recipe, b, 0o644); err != nil {
				t.Fatal(err)
			}
			startDaemon(t, storeDir)
			t.Setenv("DBFORK_SOCKET", api.SocketPath(storeDir))
			t.Cleanup(dbforktest.Close)
			ctx := context.Background()
			var kept *pgx.Conn
			t.Cleanup(func() {
				if kept != nil {
					kept.Close(ctx)
				}
			})
			for i := 0; i < 3; i++ {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					in := dbforktest.Fresh(t, recipe)
					if in.Mode != mode {
						t.Fatalf("mode %q, want %q", in.Mode, mode)
					}
					if r := rows(t, in.DSN); r != "golden" { // per test: follows
						t.Fatalf("a connection made per test sees %q", r)
					}
					if kept == nil {
						if kept, err = pgx.Connect(ctx, in.DSN); err != nil {
							t.Fatal(err)
						}
						if _, err := kept.Exec(ctx, "insert into t values ('kept')"); err != nil {
							t.Fatal(err)
						}
						return
					}
					if _, err := kept.Exec(ctx, "select count(*) from t"); err == nil {
						t.Fatalf("test %d: a connection kept from the test before still works: it sees that test's rows", i)
					}
				})
			}
		})
	}
}
