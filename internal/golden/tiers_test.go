package golden_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: a build and its cache, the hand-over's refusals and the pure
// parts; not concurrency, btrfs, the step cache's equivalence builds.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, `^(TestBuildCachesAndRebuildsOnChange|TestUnknownKeyPrefix|TestHashCacheSaysWhyAnInputFailed|TestGoldenEntriesRefused|TestCheckFileModes|TestStepKeysChain|TestSetIDGoldenIsRefused)$`, ""))
}
