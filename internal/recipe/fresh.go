package recipe

import "github.com/dbfork/dbfork/internal/errs"

// MaxSlots is the most slots a golden may have: each is a whole database
// with its own catalog files, so the file count grows with them.
const MaxSlots = 256

// Fresh holds the [fresh] table: Slots further copies of the recipe's
// database, made in the build server after loading, so a lease can hand
// one out per test without cloning anything (POST /v1/leases/{id}/fresh).
type Fresh struct {
	Slots int
}

type rawFresh struct {
	Slots *int `toml:"slots"`
}

func (r *Recipe) fillFresh(name string, raw *rawFresh) error {
	if raw == nil || raw.Slots == nil {
		return nil
	}
	n := *raw.Slots
	if n < 0 || n > MaxSlots {
		return errs.Invalid("%s: [fresh] slots = %d: use 0 to %d", name, n, MaxSlots)
	}
	// Whether the engine's goldens can carry slots is its driver's to say
	// (engine.CheckSlots, asked when the key is computed).
	r.Fresh.Slots = n
	return nil
}
