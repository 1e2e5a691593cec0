package recipe

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

func TestCacheSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dbfork.toml")
	r, err := Parse(path, []byte("engine = \"postgres\"\n[cache]\nfrom = \"127.0.0.1:5000/goldens/shop\"\nto = \" ghcr.example/acme/shop \"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Cache.From != "127.0.0.1:5000/goldens/shop" || r.Cache.To != "ghcr.example/acme/shop" {
		t.Fatalf("cache = %+v", r.Cache)
	}
	for _, bad := range []string{
		"[cache]\nfrom = \"https://reg/x\"\n",
		"[cache]\nto = \"reg/x y\"\n",
		"[cache]\nform = \"reg/x\"\n",
	} {
		_, err := Parse(path, []byte("engine = \"postgres\"\n"+bad))
		if !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%q: %v, want an invalid-input error", bad, err)
		}
	}
}
