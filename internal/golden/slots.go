package golden

import (
	"context"
	"fmt"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/recipe"
)

// SlotMaker is implemented by engines that can copy the recipe's
// database into further databases of the same server at build time
// (PostgreSQL: CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY).
type SlotMaker interface {
	MakeSlots(ctx context.Context, srv *engine.Server, names []string) error
}

// SlotNames are the names of a golden's n slots: slot_000, slot_001, …
// (fixed, so the manifest and every clone agree without asking the server).
func SlotNames(n int) []string {
	if n <= 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("slot_%03d", i)
	}
	return out
}

// makeSlots makes the recipe's slots in the build server, after the
// database is frozen and analyzed and before the clean stop: the slots
// are copies of the finished database (no slot sets hint bits or
// freezes on a test's first read) and part of the data dir every clone
// gets, paid for once per golden, not per test.
func makeSlots(ctx context.Context, eng engine.Engine, srv *engine.Server, r *recipe.Recipe, o Options) error {
	names := SlotNames(r.Fresh.Slots)
	if len(names) == 0 {
		return nil
	}
	sm, ok := eng.(SlotMaker)
	if !ok {
		return errs.Unsupported("[fresh] slots: %s cannot copy a database inside its server; remove slots from the recipe", eng.Name())
	}
	o.Progress.Step(fmt.Sprintf("make %d slots", len(names)))
	if err := sm.MakeSlots(ctx, srv, names); err != nil {
		return fmt.Errorf("make slots: %w", err)
	}
	return nil
}
