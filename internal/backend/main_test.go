package backend_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/reexec"
)

// The rootless overlay helper runs this test binary again
// (reexec.Register in usernsexec.go): dispatch it before any test runs.
func TestMain(m *testing.M) {
	reexec.Main()
	os.Exit(m.Run())
}
