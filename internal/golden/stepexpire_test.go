package golden_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// fakeGolden publishes a manifest-only golden (Expire reads manifests and
// use records, nothing else) used at the given time.
func fakeGolden(t *testing.T, s *store.Store, name string, used time.Time, m golden.Manifest) string {
	t.Helper()
	key := fmt.Sprintf("%064x", []byte(name))[:64]
	m.Key, m.Recipe, m.TotalBytes = key, "/r/dbfork.toml", 100
	dir := s.GoldenDir(key)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, golden.ManifestName), data, 0o644); err != nil {
		t.Fatal(err)
	}
	golden.MarkUsed(s, key, m.Recipe)
	if err := os.Chtimes(filepath.Join(s.CacheDir(), "uses", key), used, used); err != nil {
		t.Fatal(err)
	}
	return key
}

func TestGCKeepsIntermediatesOfKeptGoldens(t *testing.T) {
	s, err := store.Open(filepath.Join(testenv.Dir(t), "store"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ago := func(h int) time.Time { return now.Add(-time.Duration(h) * time.Hour) }
	step := func(n int) *golden.StepState { return &golden.StepState{Step: n, Steps: 2} }
	seedOld := fakeGolden(t, s, "seed-old", ago(50), golden.Manifest{Intermediate: step(1)})
	seedNow := fakeGolden(t, s, "seed-now", ago(40), golden.Manifest{Intermediate: step(1)}) // older than orphan, but a kept golden was built through it
	orphan := fakeGolden(t, s, "orphan", ago(30), golden.Manifest{Intermediate: step(1)})
	newest := fakeGolden(t, s, "newest", ago(20), golden.Manifest{Intermediate: step(1)})
	oldFinal := fakeGolden(t, s, "final-old", ago(45), golden.Manifest{StepKeys: []string{seedOld, "x"}})
	final := fakeGolden(t, s, "final", ago(10), golden.Manifest{StepKeys: []string{seedNow, "y"}})

	exp, err := golden.Expire(s, golden.ExpiryRule{Keep: 1, MinIdle: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	var gone []string
	for _, e := range exp {
		gone = append(gone, e.Key)
		if e.Key == seedOld && !strings.Contains(e.Reason, "intermediate") {
			t.Errorf("reason for an intermediate golden: %q", e.Reason)
		}
	}
	sort.Strings(gone)
	want := []string{seedOld, orphan, oldFinal}
	sort.Strings(want)
	if strings.Join(gone, ",") != strings.Join(want, ",") {
		t.Fatalf("expired %v, want %v (kept: final %s, seed-now %s, newest %s)", gone, want, final[:8], seedNow[:8], newest[:8])
	}
}
