package recipe

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// [fresh] slots: 0 by default, 0..MaxSlots, and a bad value is one line
// naming the key and what to do. Which engines take slots is their
// drivers' to say (engines.TestRecipeChoices).
func TestFreshSlots(t *testing.T) {
	parse := func(body string) (*Recipe, error) {
		t.Helper()
		return Parse("/x/dbfork.toml", []byte(body))
	}
	r, err := parse("engine = \"postgres\"\n")
	if err != nil || r.Fresh.Slots != 0 {
		t.Fatalf("default: %+v %v", r, err)
	}
	r, err = parse("engine = \"postgres\"\n[fresh]\nslots = 32\n")
	if err != nil || r.Fresh.Slots != 32 {
		t.Fatalf("slots = 32: %+v %v", r, err)
	}
	for body, want := range map[string]string{
		"engine = \"postgres\"\n[fresh]\nslots = 257\n": "use 0 to 256",
		"engine = \"postgres\"\n[fresh]\nslots = -1\n":  "use 0 to 256",
		"engine = \"postgres\"\n[fresh]\nslot = 4\n":    "unknown key",
	} {
		_, err := parse(body)
		if err == nil || !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want one invalid line with %q", body, err, want)
		}
	}
	if _, err := parse("engine = \"mariadb\"\n[fresh]\nslots = 0\n"); err != nil {
		t.Errorf("slots = 0 on mariadb: %v", err)
	}
}
