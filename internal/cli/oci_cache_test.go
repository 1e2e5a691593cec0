package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci/ocitest"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A registry whose tag for a recipe's key serves another recipe's golden
// plants nothing: the build says in one warning line that the pull was
// refused, builds the key itself, and ls shows only that golden.
func TestCacheServingAnotherKeyIsRefused(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	repo := reg.Host + "/goldens/shop"
	a := newEnv(t)
	planted := a.key()
	c := newEnv(t)
	testenv.ShopRecipe(t, c.proj, 10)
	victim := c.key()
	if victim == planted {
		t.Fatal("the two recipes have one key")
	}
	a.mustRun("push", repo, "--tag", victim)

	b := newEnv(t)
	testenv.ShopRecipe(t, b.proj, 10)
	recipe := filepath.Join(b.proj, "dbfork.toml")
	body, _ := os.ReadFile(recipe)
	if err := os.WriteFile(recipe, append(body, []byte("\n[cache]\nfrom = \""+repo+"\"\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	r := b.mustRun("build")
	if got := strings.TrimSpace(r.stdout); got != victim {
		t.Fatalf("build printed %q, want %s", got, victim)
	}
	var warned []string
	for _, l := range strings.Split(r.stderr, "\n") {
		if strings.Contains(l, golden.Short(planted)) {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "refused") || !strings.Contains(warned[0], "building it") {
		t.Errorf("the build does not say in one line that the cache served another key:\n%s", r.stderr)
	}
	ls := b.ls()
	if len(ls.Goldens) != 1 || ls.Goldens[0].Key != victim {
		t.Errorf("store holds %+v, want only the recipe's own golden %s", ls.Goldens, victim)
	}
	if o := b.origin(victim); o != "build" {
		t.Errorf("the recipe's golden says it came from %q", o)
	}
}
