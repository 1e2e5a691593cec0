package cli

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
)

// The environment's say in which goldens gc keeps (flags win).
const (
	GCKeepEnv   = "DBFORK_GC_KEEP"   // goldens kept per recipe (default 3)
	GCBudgetEnv = "DBFORK_GC_BUDGET" // most bytes all goldens may take, e.g. 50G (default: no budget)
)

// expiryFlags are gc's flags for goldens that expired.
type expiryFlags struct {
	keep    int
	budget  string
	minIdle time.Duration
	none    bool
}

func (f *expiryFlags) add(cmd *cobra.Command) {
	keep := 3
	if n, err := strconv.Atoi(os.Getenv(GCKeepEnv)); err == nil && n >= 0 {
		keep = n
	}
	cmd.Flags().IntVar(&f.keep, "keep", keep, "goldens kept per recipe: the ones it used last (also "+GCKeepEnv+")")
	cmd.Flags().StringVar(&f.budget, "budget", os.Getenv(GCBudgetEnv), "most bytes all goldens may take (e.g. 50G): least recently used go first (also "+GCBudgetEnv+")")
	cmd.Flags().DurationVar(&f.minIdle, "min-idle", time.Hour, "keep any golden used more recently than this")
	cmd.Flags().BoolVar(&f.none, "keep-goldens", false, "remove no complete golden, only leftovers")
}

func (f *expiryFlags) rule(s *store.Store) (golden.ExpiryRule, error) {
	r := golden.ExpiryRule{Keep: f.keep, MinIdle: f.minIdle, InUse: map[string]bool{}}
	if f.keep < 0 {
		return r, errs.Invalid("--keep %d: give 0 or more goldens per recipe", f.keep)
	}
	if f.budget != "" {
		n, err := fsutil.ParseSize(f.budget)
		if err != nil {
			return r, errs.Invalid("--budget %q: %w (e.g. 50G)", f.budget, err)
		}
		r.Budget = n
	}
	insts, err := instance.List(s)
	if err != nil && !os.IsNotExist(err) {
		return r, err
	}
	for _, st := range insts {
		r.InUse[st.Key] = true
	}
	return r, nil
}

// expireGoldens removes the goldens the rule does not keep and returns
// what it removed and the bytes freed; one it cannot remove (in use by
// now, being built) is reported and left.
func expireGoldens(g *globals, s *store.Store, f *expiryFlags) (removed []golden.Expired, freed int64, failed int, err error) {
	golden.ReapUses(s)
	if f.none {
		return nil, 0, 0, nil
	}
	rule, err := f.rule(s)
	if err != nil {
		return nil, 0, 0, err
	}
	exp, err := golden.Expire(s, rule, time.Now())
	if err != nil {
		return nil, 0, 0, err
	}
	for _, e := range exp {
		gd, err := golden.Lookup(s, e.Key)
		if err != nil {
			continue // gone meanwhile
		}
		if err := removeGolden(s, gd); err != nil {
			failed++
			fmt.Fprintf(g.stderr, "dbfork: kept golden %s: %v\n", e.Key[:12], err)
			continue
		}
		golden.ForgetUse(s, e.Key)
		removed = append(removed, e)
		freed += e.Bytes
	}
	return removed, freed, failed, nil
}

func newPinCmd(g *globals) *cobra.Command {
	var remove bool
	cmd := &cobra.Command{
		Use:   "pin KEY... [--remove]",
		Short: "Keep goldens from expiring in gc (--remove lets them expire again)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			for _, prefix := range args {
				gd, err := golden.Find(s, prefix)
				if err != nil {
					return err
				}
				if remove {
					err = golden.Unpin(s, gd.Key)
				} else {
					err = golden.Pin(s, gd.Key)
				}
				if err != nil {
					return err
				}
				verb := "pinned"
				if remove {
					verb = "unpinned"
				}
				fmt.Fprintf(g.stdout, "%s golden %s\n", verb, gd.Key[:12])
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&remove, "remove", false, "unpin")
	return cmd
}
