package golden_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/testenv"
)

// stepRecipe is a seed (a table, a sequence, rows) and a migration: the
// shape the step cache is for.
func stepRecipe(t *testing.T, dir, migration string) string {
	return testenv.WriteRecipe(t, dir, `
engine = "postgres"
database = "shop"
owner = "shop"

[[load]]
sql = ["seed.sql"]

[[load]]
sql = ["migrate.sql"]
`, map[string]string{
		"seed.sql": "create sequence tickets; create table items(id serial primary key, name text not null);\n" +
			"insert into items(name) select 'item ' || g from generate_series(1, 5000) g;\n" +
			"select nextval('tickets') from generate_series(1, 42);\n",
		"migrate.sql": migration,
	})
}

const (
	migrationA = "alter table items add column price int default 1;\n"
	migrationB = "alter table items add column price int default 2; create index on items(name); select nextval('tickets');\n"
)

func TestStepCacheRebuildsFromTheLastUnchangedStep(t *testing.T) {
	s, pg, dir := setup(t)
	ctx := context.Background()
	always := golden.Options{StepCacheMin: time.Nanosecond}
	path := stepRecipe(t, filepath.Join(dir, "proj"), migrationA)
	first, err := golden.Build(ctx, s, pg, load(t, path), always)
	if err != nil {
		t.Fatal(err)
	}
	if first.Golden.Manifest.ReusedSteps != 0 || len(first.Golden.Manifest.StepKeys) != 2 {
		t.Fatalf("first build: reused %d, step keys %d", first.Golden.Manifest.ReusedSteps, len(first.Golden.Manifest.StepKeys))
	}
	step1 := first.Golden.Manifest.StepKeys[0]
	inter, err := golden.Lookup(s, step1)
	if err != nil {
		t.Fatalf("no intermediate golden after step 1: %v", err)
	}
	if st := inter.Manifest.Intermediate; st == nil || st.Step != 1 || st.Steps != 2 || len(inter.Manifest.Inputs) != 1 {
		t.Fatalf("intermediate manifest: %+v, inputs %d", st, len(inter.Manifest.Inputs))
	}
	// Never handed out as a golden to clone.
	if err := golden.CheckClonable(inter); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "intermediate") {
		t.Fatalf("CheckClonable of an intermediate golden: %v", err)
	}

	// The migration changes: step 1 comes from the intermediate golden.
	if err := os.WriteFile(filepath.Join(dir, "proj", "migrate.sql"), []byte(migrationB), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, err := golden.Build(ctx, s, pg, load(t, path), always)
	if err != nil {
		t.Fatal(err)
	}
	m := inc.Golden.Manifest
	if !inc.Built || m.ReusedSteps != 1 || m.StepKeys[0] != step1 || inc.Golden.Key == first.Golden.Key {
		t.Fatalf("incremental build: built %v reused %d keys %v", inc.Built, m.ReusedSteps, m.StepKeys)
	}

	// Sums of files unchanged since the copy come from the intermediate's
	// manifest: they must still be the files' sums.
	if probs, err := golden.Verify(inc.Golden, true); err != nil || len(probs) > 0 {
		t.Fatalf("incremental golden does not verify: %v %v", err, probs)
	}

	// A full build of the same recipe in another store, no step cache:
	// the same key, and the same rows, schema and sequences.
	s2, _ := openIn(t, filepath.Join(dir, "other"))
	full, err := golden.Build(ctx, s2, pg, load(t, path), golden.Options{StepCacheMin: -1})
	if err != nil {
		t.Fatal(err)
	}
	if full.Golden.Key != inc.Golden.Key || full.Golden.Manifest.ReusedSteps != 0 {
		t.Fatalf("full build key %s, incremental %s", full.Golden.Key, inc.Golden.Key)
	}
	if all, _ := golden.List(s2); len(all) != 1 {
		t.Fatalf("a build without the step cache left %d goldens, want 1", len(all))
	}
	dumpGolden(t, pg, inc.Golden.DataDir(), s, filepath.Join(dir, "dump", "inc.sql"), filepath.Join(dir, "dump", "inc.dump"))
	dumpGolden(t, pg, full.Golden.DataDir(), s2, filepath.Join(dir, "dump", "full.sql"), filepath.Join(dir, "dump", "full.dump"))
	a, _ := os.ReadFile(filepath.Join(dir, "dump", "inc.sql"))
	b, _ := os.ReadFile(filepath.Join(dir, "dump", "full.sql"))
	if len(a) == 0 || !bytes.Equal(dropRestrictKeys(a), dropRestrictKeys(b)) {
		t.Fatalf("incremental and full build differ:\n--- incremental\n%s\n--- full\n%s", a, b)
	}
	for _, want := range []string{"price integer DEFAULT 2", "SELECT pg_catalog.setval('public.tickets', 43, true)", "item 5000"} {
		if !bytes.Contains(a, []byte(want)) {
			t.Fatalf("dump lacks %q", want)
		}
	}
}

// dropRestrictKeys removes pg_dump's \restrict lines, whose key is new on
// every run.
func dropRestrictKeys(b []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(`\restrict`)) || bytes.HasPrefix(l, []byte(`\unrestrict`)) {
			continue
		}
		out = append(out, l)
	}
	return bytes.Join(out, []byte("\n"))
}
