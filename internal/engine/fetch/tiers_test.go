package fetch_test

import (
	"os"
	"testing"

	_ "github.com/dbfork/dbfork/internal/engine/engines" // the drivers declare the packages
	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: everything but the real mvn and pip runs (each starts a JVM or
// resolves against a package index).
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, "", `^(TestMvnIgnoresPlantedConfig|TestMvnHomeAndDamagedLocalJar|TestFetchThroughMvn|TestPipIgnoresCallerEnv)$`))
}
