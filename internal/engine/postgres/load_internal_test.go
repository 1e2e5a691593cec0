package postgres

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
)

// A server that dies mid-file (a PANIC when WAL cannot be written on a
// full disk) leaves psql knowing only that the connection was lost: the
// error names the file's line and the server's own reason.
func TestServerLostNamesTheReason(t *testing.T) {
	stderr := "psql:<stdin>:2: server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.\npsql:<stdin>:2: error: connection to server was lost\n"
	if n := lostAt(stderr); n != 2 {
		t.Fatalf("lostAt = %d, want 2", n)
	}
	if n := lostAt("psql:<stdin>:7: ERROR:  relation \"x\" does not exist\n"); n != 0 {
		t.Fatalf("lostAt of an SQL error = %d, want 0", n)
	}
	log := filepath.Join(t.TempDir(), "server.log")
	os.WriteFile(log, []byte(strings.Join([]string{
		"2026-11-25 10:00:00 UTC [41] LOG:  database system is ready to accept connections",
		"2026-11-25 10:00:03 UTC [52] FATAL:  terminating connection because of crash of another server process",
		`2026-11-25 10:00:03 UTC [50] PANIC:  could not write to file "pg_wal/xlogtemp.50": No space left on device`,
		"2026-11-25 10:00:03 UTC [41] LOG:  server process (PID 50) was terminated by signal 6: Aborted",
	}, "\n")), 0o600)
	err := serverLost(context.Background(), &engine.Server{LogFile: log}, "big.sql", 2)
	want := `big.sql:2: the build server stopped: PANIC: could not write to file "pg_wal/xlogtemp.50": No space left on device`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}
