package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci"
	"github.com/dbfork/dbfork/internal/store"
)

func newBuildCmd(g *globals) *cobra.Command {
	var file string
	var asJSON, explain bool
	var cacheFrom, cacheTo, stepCache string
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "build [-f dbfork.toml] [--cache-from REGISTRY/REPO] [--cache-to REGISTRY/REPO]",
		Short: "Build the recipe's golden (once; cached by content hash) and print its key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			r, err := loadRecipe(file)
			if err != nil {
				return err
			}
			s, err := g.openOwnStore()
			if err != nil {
				return err
			}
			// The server first: a recipe this machine cannot run fails
			// before its flags are looked at.
			p := g.project(s, rf)
			if _, err := p.Engine(ctx, r); err != nil {
				return err
			}
			if cacheFrom != "" {
				r.Cache.From = cacheFrom
			}
			if cacheTo != "" {
				r.Cache.To = cacheTo
			}
			// build pushes itself (below), so a failed push fails it.
			pushTo := r.Cache.To
			r.Cache.To = ""
			if stepCache == "" {
				stepCache = os.Getenv("DBFORK_STEP_CACHE_MIN")
			}
			if stepCache != "" {
				if p.Build.StepCacheMin, err = parseStepCacheMin(stepCache); err != nil {
					return err
				}
			}
			b, err := p.Golden(ctx, r)
			if err != nil {
				return err
			}
			res := b.Result
			var pushed *oci.Stats
			if pushTo != "" {
				po, err := packOptions(g)
				if err != nil {
					return err
				}
				if pushed, err = oci.Push(ctx, s, res.Golden, pushTo, nil, rf.registry(), po); err != nil {
					return fmt.Errorf("golden %s is built, but the push to %s failed: %w", golden.Short(res.Golden.Key), pushTo, err)
				}
				pushSteps(ctx, g, s, res.Golden, pushTo, rf, po)
			}
			m := res.Golden.Manifest
			why := explainBuild(g, s, r.Path, res, explain || g.verbose)
			if asJSON {
				return printJSON(g.stdout, map[string]any{
					"key": res.Golden.Key, "built": res.Built, "waited": res.Waited,
					"engine": m.Engine, "engine_version": m.EngineVersion,
					"dir": res.Golden.Dir, "total_bytes": m.TotalBytes, "build_seconds": m.BuildSeconds,
					"pulled": res.Pulled, "pushed": pushed, "changes": why,
					"reused_steps": m.ReusedSteps, "reused_from": reusedFrom(m),
				})
			}
			fmt.Fprintln(g.stdout, res.Golden.Key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&explain, "explain", false, "say why the golden was built or reused: the inputs that changed since this recipe's last golden (also -v)")
	cmd.Flags().StringVar(&stepCache, "step-cache-min", "", "keep the state after a load step as an intermediate golden when the steps since the last kept state took this long (default 5s, also DBFORK_STEP_CACHE_MIN; 0: after every step but the last; off: no step cache)")
	cmd.Flags().StringVar(&cacheFrom, "cache-from", "", "pull the golden from this registry repository if it holds the key (overrides [cache] from)")
	cmd.Flags().StringVar(&cacheTo, "cache-to", "", "push the golden to this registry repository (overrides [cache] to)")
	rf.add(cmd)
	return cmd
}

// explainBuild compares the golden with the one this recipe used last
// and, when asked, says on stderr why it was built or reused.
func explainBuild(g *globals, s *store.Store, recipePath string, res *golden.Result, say bool) []string {
	if !res.Built && !res.Pulled {
		if say {
			fmt.Fprintf(g.stderr, "dbfork: reused golden %s: every input is as it was when it was built\n", golden.Short(res.Golden.Key))
		}
		return []string{}
	}
	prev, changes := golden.Explain(s, recipePath, res.Golden)
	if changes == nil {
		changes = []string{}
	}
	if !say {
		return changes
	}
	if m := res.Golden.Manifest; res.Built && m.ReusedSteps > 0 {
		fmt.Fprintf(g.stderr, "dbfork: reused steps 1-%d from intermediate golden %s; ran steps %d-%d\n",
			m.ReusedSteps, golden.Short(reusedFrom(m)), m.ReusedSteps+1, len(m.StepKeys))
	}
	how := "built golden " + golden.Short(res.Golden.Key)
	if res.Pulled {
		how = "pulled golden " + golden.Short(res.Golden.Key)
	}
	switch {
	case prev == nil:
		fmt.Fprintf(g.stderr, "dbfork: %s: no earlier golden of %s in this store\n", how, recipePath)
	case len(changes) == 0:
		fmt.Fprintf(g.stderr, "dbfork: %s: inputs as golden %s's (a step's environment or dbfork's key format changed)\n", how, golden.Short(prev.Key))
	default:
		fmt.Fprintf(g.stderr, "dbfork: %s; since golden %s:\n", how, golden.Short(prev.Key))
		for _, c := range changes {
			fmt.Fprintf(g.stderr, "dbfork:   %s\n", c)
		}
	}
	return changes
}

// reusedFrom is the key of the intermediate golden a build started from
// ("" for a build that ran every step).
func reusedFrom(m *golden.Manifest) string {
	if m.ReusedSteps <= 0 || m.ReusedSteps > len(m.StepKeys) {
		return ""
	}
	return m.StepKeys[m.ReusedSteps-1]
}

// parseStepCacheMin reads --step-cache-min / DBFORK_STEP_CACHE_MIN: a
// duration, 0 for every step, or off.
func parseStepCacheMin(v string) (time.Duration, error) {
	switch strings.TrimSpace(v) {
	case "":
		return 0, nil
	case "off", "false", "no", "-1":
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if v == "0" {
		d, err = 0, nil
	}
	if err != nil || d < 0 {
		return 0, errs.Invalid("step cache minimum %q: give a duration (1s, 500ms), 0 to keep the state after every step, or off", v)
	}
	if d == 0 {
		d = time.Nanosecond // every step: any step takes longer
	}
	return d, nil
}

func stepCacheMinEnv() time.Duration {
	d, _ := parseStepCacheMin(os.Getenv("DBFORK_STEP_CACHE_MIN"))
	return d
}
