package instance_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: an instance's life on one backend; not every backend, engine and
// isolation probe.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, `^(TestPrewarm|TestPrewarmIgnoresPlantedFiles|TestDetachedInstanceSurvivesGCUntilDown)$`, ""))
}
