package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/progress"
)

func newBuildCmd(g *globals) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "build [-f dbfork.toml]",
		Short: "Build the recipe's golden (once; cached by content hash) and print its key",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			r, err := loadRecipe(file)
			if err != nil {
				return err
			}
			s, err := g.openStore()
			if err != nil {
				return err
			}
			eng, err := g.openEngine(s)(ctx, r)
			if err != nil {
				return err
			}
			res, err := golden.Build(ctx, s, eng, r, golden.Options{Progress: progress.New(g.stderr), Log: g.log})
			if err != nil {
				return err
			}
			m := res.Golden.Manifest
			if asJSON {
				return printJSON(g.stdout, map[string]any{
					"key": res.Golden.Key, "built": res.Built, "waited": res.Waited,
					"engine": m.Engine, "engine_version": m.EngineVersion,
					"dir": res.Golden.Dir, "total_bytes": m.TotalBytes, "build_seconds": m.BuildSeconds,
				})
			}
			fmt.Fprintln(g.stdout, res.Golden.Key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
