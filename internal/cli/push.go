package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci"
)

func newPushCmd(g *globals) *cobra.Command {
	var file string
	var tags []string
	var asJSON bool
	var rf registryFlags
	cmd := &cobra.Command{
		Use:   "push [-f dbfork.toml | KEY] REGISTRY/REPO",
		Short: "Push a golden to an OCI registry, tagged with its key (only blobs the registry lacks are sent)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			keyArg, repo := "", args[len(args)-1]
			if len(args) == 2 {
				if file != "" {
					return errs.Invalid("give either -f RECIPE or a KEY, not both")
				}
				keyArg = args[0]
			}
			s, err := g.openStore()
			if err != nil {
				return err
			}
			gd, err := findGolden(ctx, g, s, keyArg, file)
			if err != nil {
				return err
			}
			po, err := packOptions(g)
			if err != nil {
				return err
			}
			st, err := oci.Push(ctx, s, gd, repo, tags, rf.registry(), po)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(g.stdout, map[string]any{"key": gd.Key, "repository": repo, "stats": st})
			}
			fmt.Fprintf(g.stderr, "pushed %s:%s (%s): sent %d of %d layers, %s of %s compressed (%s of data) in %.1fs\n",
				repo, golden.Short(gd.Key), st.Manifest.Digest, st.LayersSent, st.Layers,
				humanBytes(st.BytesSent), humanBytes(st.Compressed), humanBytes(st.Uncompressed), st.Seconds)
			fmt.Fprintln(g.stdout, repo+":"+gd.Key)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe whose golden to push (default ./dbfork.toml)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "an extra tag (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	rf.add(cmd)
	return cmd
}

func newPullCmd(g *globals) *cobra.Command {
	var asJSON bool
	var rf registryFlags
	var maxSize sizeFlag
	cmd := &cobra.Command{
		Use:   "pull REGISTRY/REPO:TAG|REGISTRY/REPO@DIGEST",
		Short: "Pull a golden from an OCI registry into the store (verified, published atomically)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			o, err := g.unpackOptions(s, maxSize)
			if err != nil {
				return err
			}
			res, err := oci.Pull(cmd.Context(), s, args[0], rf.registry(), o)
			if err != nil {
				return err
			}
			return g.printUnpacked(res, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	rf.add(cmd)
	maxSize.add(cmd)
	return cmd
}
