package enginetest_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: one real server per engine, built and driven (not every
// backend, version, crash and rootless variant).
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, `^(TestPostgres|TestMariaDB)$/^(driver|build)$`, ""))
}
