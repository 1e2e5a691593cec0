package golden

import (
	"context"
	"errors"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	_ "github.com/dbfork/dbfork/internal/engine/engines" // the drivers
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/recipe"
)

// namedEngine answers Name only: Key must refuse before asking more.
type namedEngine struct {
	engine.Engine
	name string
}

func (e namedEngine) Name() string { return e.name }

// [fresh] slots on an engine whose driver says its goldens cannot carry
// them is refused when the key is computed, in the line the recipe
// parser used to give.
func TestKeyRefusesSlotsTheDriverLacks(t *testing.T) {
	r, err := recipe.Parse("/x/dbfork.toml", []byte("engine = \"mariadb\"\n[fresh]\nslots = 4\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, _, err = Key(context.Background(), namedEngine{name: "mariadb"}, r, nil)
	want := `dbfork.toml: [fresh] slots works with engine = "postgres" only (a mariadb database cannot be copied as files); remove it, leases reset in place instead`
	if !errors.Is(err, errs.ErrInvalid) || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
