package testenv

import (
	"flag"
	"testing"

	"github.com/dbfork/dbfork/internal/reexec"
)

// RunTiers runs a package's tests in one of two tiers. The full tier (go
// test ./..., CI) runs everything. The short tier (go test -short ./...,
// the contributor's loop: a couple of minutes on two cores, still one
// real server per engine, as golang-migrate runs one version under
// -short) runs only the tests run matches and skip does not. A -run or
// -skip given on the command line wins. The lists live in each heavy
// package's tiers_test.go, so what the short tier leaves out is written
// down in one place per package.
//
// First of all it runs the helper main the binary was started as, if any
// (reexec.Main): tests start servers and fetches that run the test
// binary itself again as one of dbfork's helpers.
func RunTiers(m *testing.M, run, skip string) int {
	reexec.Main()
	flag.Parse()
	if testing.Short() {
		set := func(name, v string) {
			if f := flag.Lookup(name); v != "" && f != nil && f.Value.String() == "" {
				_ = flag.Set(name, v)
			}
		}
		set("test.run", run)
		set("test.skip", skip)
	}
	return m.Run()
}
