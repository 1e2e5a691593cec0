package golden_test

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A recipe with [fresh] slots on PostgreSQL 15 (which copies bytes) on
// an XFS store: the manifest lists the slots, the key differs from the
// same recipe without them, each slot holds the loaded rows, and the
// slots' files share their extents with the database's (the golden does
// not hold its database 1+N times).
func TestBuildSlots(t *testing.T) {
	testenv.RequireRoot(t)
	root := testenv.LoopFS(t, "xfs", 1<<30)
	s, pg := openIn(t, root)
	ctx := context.Background()
	path := testenv.ShopRecipe(t, filepath.Join(root, "proj"), 20000)
	plain, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, "\n[fresh]\nslots = 3\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := golden.Build(ctx, s, pg, load(t, path), golden.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Golden.Manifest
	if res.Golden.Key == plain.Golden.Key || !slices.Equal(m.Slots, []string{"slot_000", "slot_001", "slot_002"}) {
		t.Fatalf("key %s (without slots %s), slots %v", res.Golden.Key, plain.Golden.Key, m.Slots)
	}
	// Where each slot's files are, and those files at the end of the
	// list (a check that leaves the slots out stops at the first).
	if len(m.SlotDirs) != 3 {
		t.Fatalf("slot dirs %v, want one per slot", m.SlotDirs)
	}
	inSlot := func(p string) bool {
		for _, d := range m.SlotDirs {
			if strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	list, seenSlot := golden.FilesOf(t, m), false
	for _, f := range list {
		if inSlot(f.Path) {
			seenSlot = true
		} else if seenSlot {
			t.Fatalf("%s is listed after a slot's files", f.Path)
		}
	}
	if !seenSlot || !inSlot(list[len(list)-1].Path) {
		t.Fatalf("no file of the slot dirs %v in the list", m.SlotDirs)
	}
	for _, db := range append([]string{"shop"}, m.Slots...) {
		withServer(t, pg, res.Golden.DataDir(), s, db, func(env []string) {
			out, err := psqlOut(env, "select count(*) from items")
			if err != nil || strings.TrimSpace(out) != "20001" {
				t.Errorf("%s: items %q %v, want the 20001 loaded rows", db, out, err)
			}
		})
	}
	// The biggest file of the database and its copies in each slot
	// (same size and content): shared extents.
	var top golden.File
	for _, f := range golden.FilesOf(t, m) {
		if f.Size > top.Size && strings.HasPrefix(f.Path, "base/") {
			top = f
		}
	}
	var big []string
	for _, f := range golden.FilesOf(t, m) {
		if f.SHA256 == top.SHA256 {
			big = append(big, f.Path)
		}
	}
	if len(big) < 4 {
		t.Fatalf("want a big file per database, got %v", big)
	}
	shared := 0
	for _, p := range big {
		out, err := exec.Command("filefrag", "-v", filepath.Join(res.Golden.DataDir(), p)).CombinedOutput()
		if err != nil {
			t.Fatalf("filefrag: %v %s", err, out)
		}
		if strings.Contains(string(out), "shared") {
			shared++
		}
	}
	if shared < len(big) {
		t.Errorf("%d of %d big database files share extents, want all", shared, len(big))
	}
	// On disk the golden holds its database about once, and says so
	// (what ls shows and gc's budget counts).
	if m.DiskBytes <= 0 || m.Disk() > m.TotalBytes*6/10 {
		t.Errorf("disk bytes %d of %d apparent: the slots' shared blocks counted again", m.DiskBytes, m.TotalBytes)
	}
	if pm := plain.Golden.Manifest; pm.DiskBytes <= 0 || pm.DiskBytes > pm.TotalBytes+1<<20 {
		t.Errorf("golden without slots: disk bytes %d, apparent %d", pm.DiskBytes, pm.TotalBytes)
	}
	// Kept beside the manifest, not in it (a pushed manifest is the same
	// from every store), and read back with it.
	again, err := golden.Lookup(s, res.Golden.Key)
	if err != nil || again.Manifest.DiskBytes != m.DiskBytes {
		t.Errorf("looked up again: disk bytes %v (%v), want %d", again, err, m.DiskBytes)
	}
	if raw, err := os.ReadFile(filepath.Join(res.Golden.Dir, golden.ManifestName)); err != nil || strings.Contains(string(raw), "disk") {
		t.Errorf("the manifest names the store's disk use (%v)", err)
	}
	// The sums the build took from a file's twin (same blocks) instead
	// of reading it are the files' sums.
	if probs, err := golden.Verify(res.Golden, true); err != nil || len(probs) > 0 {
		t.Fatalf("golden with slots does not verify: %v %v", err, probs)
	}
}

func psqlOut(env []string, sql string) (string, error) {
	c := exec.Command("psql", "-XAtc", sql)
	c.Env = env
	out, err := c.Output()
	return string(out), err
}

// Slots with the step cache: a kept state after a step is the database
// as the step left it, without slots (the recipe's slots are copies of
// the finished database, made once at the end); the golden's slots hold
// what every step loaded, and a rebuild from the kept state makes them
// again.
func TestBuildSlotsWithKeptSteps(t *testing.T) {
	s, pg, dir := setup(t)
	ctx := context.Background()
	always := golden.Options{StepCacheMin: time.Nanosecond}
	path := stepRecipe(t, filepath.Join(dir, "proj"), migrationA)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, "\n[fresh]\nslots = 2\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(res *golden.Result) {
		t.Helper()
		m := res.Golden.Manifest
		if !slices.Equal(m.Slots, []string{"slot_000", "slot_001"}) {
			t.Fatalf("slots %v", m.Slots)
		}
		for _, db := range append([]string{"shop"}, m.Slots...) {
			withServer(t, pg, res.Golden.DataDir(), s, db, func(env []string) {
				out, err := psqlOut(env, "select count(*), sum(price) from items")
				if err != nil || strings.TrimSpace(out) != "5000|5000" {
					t.Errorf("%s: items %q %v, want 5000 rows of the seed with the migration's price", db, out, err)
				}
			})
		}
		if probs, err := golden.Verify(res.Golden, true); err != nil || len(probs) > 0 {
			t.Fatalf("golden does not verify: %v %v", err, probs)
		}
	}
	first, err := golden.Build(ctx, s, pg, load(t, path), always)
	if err != nil {
		t.Fatal(err)
	}
	check(first)
	inter, err := golden.Lookup(s, first.Golden.Manifest.StepKeys[0])
	if err != nil {
		t.Fatalf("no kept state after step 1: %v", err)
	}
	if n := databaseDirs(golden.FilesOf(t, inter.Manifest)); n != databaseDirs(golden.FilesOf(t, first.Golden.Manifest))-2 {
		t.Fatalf("the kept state after step 1 has %d database dirs, the golden %d: slots were made before the last step", n, databaseDirs(golden.FilesOf(t, first.Golden.Manifest)))
	}
	// The migration changes: the rebuild starts from the kept state and
	// makes the slots again, of the new migration's data.
	if err := os.WriteFile(filepath.Join(dir, "proj", "migrate.sql"), []byte(migrationA+"update items set price = 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inc, err := golden.Build(ctx, s, pg, load(t, path), always)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Golden.Manifest.ReusedSteps != 1 {
		t.Fatalf("rebuild reused %d steps, want 1", inc.Golden.Manifest.ReusedSteps)
	}
	check(inc)
}

// databaseDirs counts the dirs right below base/ (one per database).
func databaseDirs(files []golden.File) int {
	n := 0
	for _, f := range files {
		if strings.HasPrefix(f.Path, "base/") && strings.Count(f.Path, "/") == 1 && fs.FileMode(f.Mode).IsDir() {
			n++
		}
	}
	return n
}
