package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/store"
)

func newVerifyCmd(g *globals) *cobra.Command {
	var quick, remove, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [KEY...]",
		Short: "Re-check goldens against their manifests (file set, modes, sizes, sha256) and name what changed",
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			var gs []*golden.Golden
			if len(args) == 0 {
				if remove {
					return errs.Invalid("--remove needs the keys of the goldens to remove")
				}
				if gs, err = golden.List(s); err != nil {
					return err
				}
			}
			for _, a := range args {
				gd, err := golden.Find(s, a)
				if err != nil {
					return err
				}
				gs = append(gs, gd)
			}
			type result struct {
				Key      string           `json:"key"`
				OK       bool             `json:"ok"`
				Problems []golden.Problem `json:"problems"`
				Removed  bool             `json:"removed,omitempty"`
			}
			var results []result
			bad := 0
			for _, gd := range gs {
				probs, err := golden.Verify(gd, !quick)
				if err != nil {
					return err
				}
				r := result{Key: gd.Key, OK: len(probs) == 0, Problems: probs}
				if len(probs) > 0 {
					bad++
				}
				if remove && len(probs) > 0 {
					if err := removeGolden(s, gd); err != nil {
						return err
					}
					r.Removed = true
				}
				results = append(results, r)
				if !asJSON {
					state := "ok"
					if !r.OK {
						state = fmt.Sprintf("FAILED (%d problems)", len(probs))
					}
					fmt.Fprintf(g.stdout, "%s  %s\n", gd.Key[:12], state)
					for _, p := range probs {
						fmt.Fprintf(g.stdout, "    %s\n", p)
					}
					if r.Removed {
						fmt.Fprintf(g.stdout, "    removed; `dbfork build` makes it again\n")
					}
				}
			}
			if asJSON {
				if err := printJSON(g.stdout, results); err != nil {
					return err
				}
			}
			if bad > 0 && !remove {
				return errs.Conflict("%d of %d goldens failed verification; they will not be cloned (`dbfork verify --remove KEY` and `dbfork build` to rebuild)", bad, len(gs))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&quick, "quick", false, "check the file set, modes and sizes only, not the content")
	cmd.Flags().BoolVar(&remove, "remove", false, "remove the named goldens that fail verification (refused while an instance uses them)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// removeGolden deletes a golden no instance uses (an overlay clone mounts
// it as its lower dir: never delete what a mount reads).
func removeGolden(s *store.Store, gd *golden.Golden) error {
	lock, err := lockfile.TryLock(s.BuildLock(gd.Key))
	if err != nil {
		return errs.Conflict("golden %s is being built by another process; try again later", gd.Key[:12])
	}
	defer lock.Release()
	insts, err := instance.List(s)
	if err != nil {
		return err
	}
	for _, st := range insts {
		if st.Key == gd.Key {
			return errs.Conflict("golden %s is used by instance %s; stop it first (`dbfork down %s`)", gd.Key[:12], st.ID, st.ID)
		}
	}
	if m, _ := fsutil.MountsUnder(gd.Dir); len(m) > 0 {
		return errs.Conflict("golden %s has mounts below it (%v); unmount them first", gd.Key[:12], m)
	}
	// Out of sight in one rename first: a crash from here on leaves a
	// tmp-… dir that gc reaps, never a key that is half there.
	tmp, err := golden.Unpublish(s, gd.Key)
	if err != nil {
		return err
	}
	faults.At("verify:unpublished")
	return golden.Discard(tmp)
}
