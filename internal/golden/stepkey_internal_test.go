package golden

import (
	"testing"

	"github.com/dbfork/dbfork/internal/recipe"
)

// Step keys chain: a step's key depends on every step before it and on
// nothing after it, and never equals another step's or the base's.
func TestStepKeysChain(t *testing.T) {
	r := &recipe.Recipe{Steps: []recipe.Step{{Kind: "sql"}, {Kind: "run", Command: "migrate up"}}}
	in := func(seed, mig string) []Input {
		return []Input{{Step: 1, Path: "seed.sql", SHA256: seed}, {Step: 2, Path: "migrations/1.sql", SHA256: mig}}
	}
	base := stepBase("postgres", "PostgreSQL 15.18", map[string]string{"locale": "C"})
	a := stepKeys(base, r, in("s1", "m1"))
	b := stepKeys(base, r, in("s1", "m2")) // migration changed
	c := stepKeys(base, r, in("s2", "m1")) // seed changed
	other := stepKeys(stepBase("postgres", "PostgreSQL 16.4", map[string]string{"locale": "C"}), r, in("s1", "m1"))
	if len(a) != 2 || !ValidKey(a[0]) || a[0] == a[1] || a[0] == base {
		t.Fatalf("step keys %v (base %s)", a, base)
	}
	if b[0] != a[0] || b[1] == a[1] {
		t.Fatalf("a migration change must keep step 1's key and change step 2's: %v %v", a, b)
	}
	if c[0] == a[0] || c[1] == a[1] {
		t.Fatalf("a seed change must change both keys: %v %v", a, c)
	}
	if other[0] == a[0] {
		t.Fatal("another server version gave the same step key")
	}
	r.Steps[1].Command = "migrate up --all"
	if d := stepKeys(base, r, in("s1", "m1")); d[0] != a[0] || d[1] == a[1] {
		t.Fatalf("a command change must change its own step's key only: %v %v", a, d)
	}
}
