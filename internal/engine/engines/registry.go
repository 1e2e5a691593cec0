package engines

import (
	"context"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
)

// Entry is everything dbfork knows about one engine outside its own
// package: how to open it, and the few facts other layers need (the
// daemon's capacity check, inspect's table names, doctor, a pulled
// golden's version check). Nothing outside internal/engine switches on an
// engine's name: it asks its Entry.
type Entry struct {
	Name string
	// Open locates installed binaries (bindir and version may be "").
	Open func(ctx context.Context, bindir, version string) (engine.Engine, error)
	// MemoryPerInstance is what one test instance takes (test profile).
	MemoryPerInstance uint64
	// RelationNames maps data-dir paths of a running instance to table
	// names, best effort ("" for unknown paths).
	RelationNames func(ctx context.Context, conn *engine.Conn, alive bool) func(string) string
	// Installed describes the installed server, for doctor.
	Installed func(ctx context.Context) (bindir, version string, err error)
	// Major is the part of a full server version a recipe's version names.
	Major func(version string) string
	// Oldest is the oldest version dbfork can build goldens with (older
	// builds are not fetched).
	Oldest string
	// Bench is what `dbfork bench` generates and runs on this engine.
	Bench engine.BenchKit
}

var registry = map[string]Entry{
	"postgres": {
		Name: "postgres",
		Open: func(ctx context.Context, bindir, version string) (engine.Engine, error) {
			return postgres.New(ctx, bindir, version)
		},
		MemoryPerInstance: postgres.MemoryPerInstance,
		RelationNames:     postgres.RelationNames,
		Installed: func(ctx context.Context) (string, string, error) {
			pg, err := postgres.New(ctx, "", "")
			if err != nil {
				return "", "", err
			}
			v, err := pg.Version(ctx)
			return pg.Bindir, v, err
		},
		Major: func(v string) string { return versionPart(v, 1) },
		// initdb --wal-segsize (1 MiB WAL segments in goldens) came in 11.
		Oldest: "11",
		Bench:  postgres.BenchKit(),
	},
	"mariadb": mysqlEntry(mysql.MariaDB),
	"mysql":   mysqlEntry(mysql.MySQL),
}

func mysqlEntry(f mysql.Flavor) Entry {
	return Entry{
		Name: string(f),
		Open: func(ctx context.Context, bindir, version string) (engine.Engine, error) {
			return mysql.New(ctx, f, bindir, version)
		},
		MemoryPerInstance: mysql.MemoryPerInstance,
		RelationNames:     mysql.RelationNames,
		Installed: func(ctx context.Context) (string, string, error) {
			e, err := mysql.New(ctx, f, "", "")
			if err != nil {
				return "", "", err
			}
			return filepath.Dir(e.Bin.Server), e.Bin.Info.Line, nil
		},
		Major: func(v string) string { return versionPart(v, 2) },
		Bench: mysql.BenchKit(f),
	}
}

// versionPart keeps the first n dot-separated parts: "15" of 15.14,
// "10.11" of 10.11.6.
func versionPart(v string, n int) string {
	parts := strings.SplitN(v, ".", n+1)
	if len(parts) > n {
		parts = parts[:n]
	}
	return strings.Join(parts, ".")
}

// Lookup returns the entry of an engine name.
func Lookup(name string) (Entry, error) {
	if e, ok := registry[name]; ok {
		return e, nil
	}
	return Entry{}, errs.Unsupported("engine %q is not supported (use %s)", name, strings.Join(Names(), ", "))
}

// Names are the engines dbfork runs, in a stable order.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return order(out[i]) < order(out[j]) })
	return out
}

func order(n string) int {
	switch n {
	case "postgres":
		return 0
	case "mariadb":
		return 1
	}
	return 2
}

// olderThan compares dotted versions numerically ("9.6" < "11").
func olderThan(v, oldest string) bool {
	a, b := strings.Split(v, "."), strings.Split(oldest, ".")
	for i := 0; i < len(a) && i < len(b); i++ {
		x, errx := strconv.Atoi(a[i])
		y, erry := strconv.Atoi(b[i])
		if errx != nil || erry != nil {
			return false
		}
		if x != y {
			return x < y
		}
	}
	return false
}
