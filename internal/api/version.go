package api

import (
	"runtime/debug"
	"strings"
)

// APIVersion is the version of this HTTP API. /v1/health reports it as
// "api", and every client checks it before its first real call: a client
// and a daemon that speak different versions stop with one clear line
// instead of failing somewhere in the middle of a test run. Raise it when
// a request or answer changes in a way an older client or daemon would
// misread.
const APIVersion = 1

// stamp is dbfork's release version, set at build time by
// scripts/release.sh (-ldflags "-X github.com/dbfork/dbfork/internal/api.stamp=1.2.3").
var stamp = ""

// Version is dbfork's own version: the release stamp, or for a build
// without one "dev" plus what the Go toolchain recorded of the checkout.
func Version() string {
	if stamp != "" {
		return stamp
	}
	v := "dev"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	// `go install …@v1.2.3` records the module version; a plain build
	// records "(devel)" and, unless -buildvcs=false, the commit.
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		return mv
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += "+" + rev[:min(12, len(rev))]
		if modified == "true" {
			v += ".dirty"
		}
	}
	return strings.TrimSpace(v)
}
