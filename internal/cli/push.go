package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci"
	"github.com/dbfork/dbfork/internal/store"
)

func newPushCmd(g *globals) *cobra.Command {
	var file string
	var tags []string
	var asJSON, withSteps bool
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
			if withSteps {
				for _, ig := range intermediatesOf(s, gd) {
					ist, err := oci.Push(ctx, s, ig, repo, nil, rf.registry(), po)
					if err != nil {
						return fmt.Errorf("pushed golden %s, but not its intermediate golden %s: %w", golden.Short(gd.Key), golden.Short(ig.Key), err)
					}
					fmt.Fprintf(g.stderr, "pushed %s:%s (intermediate: after step %d): sent %d of %d layers\n",
						repo, golden.Short(ig.Key), ig.Manifest.Intermediate.Step, ist.LayersSent, ist.Layers)
				}
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
	cmd.Flags().BoolVar(&withSteps, "with-steps", false, "also push the intermediate goldens of the build steps it was built through that the store holds (each tagged with its step key), so a pull --with-steps gives another machine the step cache")
	rf.add(cmd)
	return cmd
}

// intermediatesOf are the intermediate goldens the store holds of the
// steps g was built through.
func intermediatesOf(s *store.Store, g *golden.Golden) []*golden.Golden {
	var out []*golden.Golden
	keys := g.Manifest.StepKeys
	for i, k := range keys {
		if i == len(keys)-1 || !golden.ValidKey(k) {
			continue
		}
		ig, err := golden.Lookup(s, k)
		if err == nil && ig.Manifest.Intermediate != nil && ig.Manifest.Intermediate.Step == i+1 {
			out = append(out, ig)
		}
	}
	return out
}

// pushSteps pushes the intermediate goldens a build's golden was built
// through to its [cache] repository too, so the next machine's build of
// a changed later step starts from them; a failure is only said.
func pushSteps(ctx context.Context, g *globals, s *store.Store, gd *golden.Golden, repo string, rf registryFlags, po oci.PackOptions) {
	for _, ig := range intermediatesOf(s, gd) {
		if _, err := oci.Push(ctx, s, ig, repo, nil, rf.registry(), po); err != nil {
			fmt.Fprintf(g.stderr, "dbfork: pushed golden %s, but not its intermediate golden %s (after step %d): %v\n",
				golden.Short(gd.Key), golden.Short(ig.Key), ig.Manifest.Intermediate.Step, err)
		}
	}
}

// repoOf is REGISTRY/REPO of a pull reference (its tag or digest cut).
func repoOf(ref string) string {
	if i := strings.LastIndex(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}

func newPullCmd(g *globals) *cobra.Command {
	var asJSON, withSteps bool
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
			if withSteps && res.Golden != nil {
				keys := res.Golden.Manifest.StepKeys
				for i, k := range keys {
					if i == len(keys)-1 || !golden.ValidKey(k) {
						continue
					}
					if _, err := golden.Lookup(s, k); err == nil {
						continue
					}
					ires, err := oci.Pull(cmd.Context(), s, repoOf(args[0])+":"+k, rf.registry(), o)
					if errors.Is(err, errs.ErrNotFound) {
						continue // a step whose state the build did not keep
					}
					if err != nil {
						return fmt.Errorf("pulled golden %s, but not the intermediate golden of step %d: %w", golden.Short(res.Key), i+1, err)
					}
					fmt.Fprintf(g.stderr, "pulled intermediate golden %s (after step %d)\n", golden.Short(ires.Key), i+1)
				}
			}
			return g.printUnpacked(res, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&withSteps, "with-steps", false, "also pull the intermediate goldens of its build steps the repository holds (pushed with push --with-steps), so a changed later step rebuilds from them")
	rf.add(cmd)
	maxSize.add(cmd)
	return cmd
}
