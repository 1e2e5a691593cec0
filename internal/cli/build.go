package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci"
)

func newBuildCmd(g *globals) *cobra.Command {
	var file string
	var asJSON bool
	var cacheFrom, cacheTo string
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
			eng, err := g.openEngine(s)(ctx, golden.EngineWant(r))
			if err != nil {
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
			res, err := golden.Build(ctx, s, eng, r, g.buildOptions(s, rf))
			if err != nil {
				return err
			}
			var pushed *oci.Stats
			if pushTo != "" {
				po, err := packOptions(g)
				if err != nil {
					return err
				}
				if pushed, err = oci.Push(ctx, s, res.Golden, pushTo, nil, rf.registry(), po); err != nil {
					return fmt.Errorf("golden %s is built, but the push to %s failed: %w", golden.Short(res.Golden.Key), pushTo, err)
				}
			}
			m := res.Golden.Manifest
			if asJSON {
				return printJSON(g.stdout, map[string]any{
					"key": res.Golden.Key, "built": res.Built, "waited": res.Waited,
					"engine": m.Engine, "engine_version": m.EngineVersion,
					"dir": res.Golden.Dir, "total_bytes": m.TotalBytes, "build_seconds": m.BuildSeconds,
					"pulled": res.Pulled, "pushed": pushed,
				})
			}
			fmt.Fprintln(g.stdout, res.Golden.Key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&cacheFrom, "cache-from", "", "pull the golden from this registry repository if it holds the key (overrides [cache] from)")
	cmd.Flags().StringVar(&cacheTo, "cache-to", "", "push the golden to this registry repository (overrides [cache] to)")
	rf.add(cmd)
	return cmd
}
