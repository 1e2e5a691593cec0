package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// WriteRecipe writes dbfork.toml and the files it names into dir and
// returns the recipe path. files maps relative names to content.
func WriteRecipe(t testing.TB, dir, toml string, files map[string]string) string {
	t.Helper()
	files["dbfork.toml"] = toml
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "dbfork.toml")
}

// ShopRecipe is a small PostgreSQL recipe: a schema, rows seed rows, and
// a command step.
func ShopRecipe(t testing.TB, dir string, rows int) string {
	return WriteRecipe(t, dir, `
engine = "postgres"
database = "shop"
owner = "shop"

[[load]]
sql = ["schema.sql", "seed/*.sql"]

[[load]]
# ran_as records who ran the command (the caller, under sudo or serve).
run = "psql -v ON_ERROR_STOP=1 -qc \"insert into items(name) values ('from-command'); create table ran_as as select $(id -u) as uid\""
`, map[string]string{
		"schema.sql":  "create table items(id serial primary key, name text not null);\n",
		"seed/01.sql": fmt.Sprintf("insert into items(name) select 'item ' || g from generate_series(1, %d) g;\n", rows),
	})
}

// ServersUnder lists processes whose working directory is below dir:
// database servers chdir into their data dir, so this finds servers
// running on anything in a store. (Tests only count them; dbfork itself
// never looks processes up like this to kill them.)
func ServersUnder(dir string) []int {
	dir, _ = filepath.EvalSymlinks(dir)
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// AssertClean fails the test if anything of dbfork's is still running or
// mounted below dir, or a build dir is left in store.
func AssertClean(t testing.TB, dir string) {
	t.Helper()
	if pids := ServersUnder(dir); len(pids) > 0 {
		t.Errorf("servers still running below %s: %v", dir, pids)
	}
	// The store itself may be a mount the test made: a loop device's
	// filesystem, or a plain store bound onto itself (nosuid), both from a
	// block device. A clone's mount (whatever its backend) comes from none.
	if under, _ := fsutil.MountsUnder(dir); len(under) > 0 {
		ms, _ := fsutil.Mounts()
		for _, m := range ms {
			if slices.Contains(under, m.Point) && !strings.HasPrefix(m.Source, "/dev/") {
				t.Errorf("mount still present: %s (%s from %s)", m.Point, m.FSType, m.Source)
			}
		}
	}
}

// TmpBuilds lists build dirs left in a store's goldens dir.
func TmpBuilds(store string) []string {
	m, _ := filepath.Glob(filepath.Join(store, "goldens", "tmp-*"))
	return m
}

// ReadJSONLine waits up to two minutes for path to hold one whole line
// (a file a background process writes once, such as an instance's
// warm.log) and decodes it into v.
func ReadJSONLine(t testing.TB, path string, v any) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(path)
		if bytes.HasSuffix(b, []byte("\n")) {
			if err := json.Unmarshal(b, v); err != nil {
				t.Fatalf("%s: %v: %q", path, err, b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds no whole line after 2 minutes: %q", path, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
