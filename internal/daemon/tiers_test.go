package daemon_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/testenv"
)

// -short: leases, the API's input checks and the pure parts; not
// recycling, resets, hot tables and capacity across pools.
func TestMain(m *testing.M) {
	os.Exit(testenv.RunTiers(m, `^(TestLeasesAreIsolatedAndNeverReused|TestAPIBadRequests|TestTCPNeedsToken|TestSparesWorkOrder|TestCapacity|TestPoolsFilteredPerPeer)$`, ""))
}
