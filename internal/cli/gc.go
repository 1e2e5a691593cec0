package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/oci"
)

func newGCCmd(g *globals) *cobra.Command {
	var all, asJSON bool
	var exp expiryFlags
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove leftovers of crashed runs: half-built goldens, orphan clones, their servers and mounts",
		Long: `gc removes what crashed dbfork processes left behind: build dirs whose
builder died (stopping the build server they recorded), instances whose
holder died or whose server is gone (stopping the recorded server, checked
by PID and start time, never by name; unmounting; removing). Live
instances made by "dbfork up" are kept unless --all is given.

It also removes goldens that expired: each recipe keeps the --keep goldens
it used last (default 3); a golden that a running instance or lease
clones from, one pinned with "dbfork pin", and one used in the last
--min-idle are always kept; with --budget, the least recently used of the
rest go until all goldens fit in it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			builds := golden.ReapBuilds(cmd.Context(), s, "", g.log)
			insts := instance.GC(cmd.Context(), s, all)
			fetches, ferr := fetch.New(g.fetchOptions(s)).GC()
			if ferr != nil {
				fmt.Fprintf(g.stderr, "dbfork: engine cache: %v\n", ferr)
			}
			for _, p := range fetches {
				fmt.Fprintf(g.stdout, "removed interrupted engine fetch %s\n", p)
			}
			for _, p := range oci.ReapPushDirs(s) {
				fmt.Fprintf(g.stdout, "removed interrupted push dir %s\n", p)
			}
			expired, freed, expFailed, err := expireGoldens(g, s, &exp)
			if err != nil {
				return err
			}
			if asJSON {
				if builds == nil {
					builds = []golden.Leftover{}
				}
				if insts == nil {
					insts = []instance.Reaped{}
				}
				if expired == nil {
					expired = []golden.Expired{}
				}
				return printJSON(g.stdout, map[string]any{"builds": builds, "instances": insts,
					"expired_goldens": expired, "freed_bytes": freed})
			}
			failed := expFailed
			for _, e := range expired {
				fmt.Fprintf(g.stdout, "removed golden %s (%s, last used %s): %s\n", e.Key[:12], humanBytes(e.Bytes),
					e.LastUsed.Format("2006-01-02 15:04"), e.Reason)
			}
			if len(expired) > 0 {
				fmt.Fprintf(g.stdout, "freed %s of goldens\n", humanBytes(freed))
			}
			for _, b := range builds {
				if b.Error != "" {
					failed++
					fmt.Fprintf(g.stderr, "dbfork: could not remove build dir %s: %s\n", b.Path, b.Error)
					continue
				}
				fmt.Fprintf(g.stdout, "removed crashed build %s\n", b.Path)
			}
			for _, r := range insts {
				if r.Error != "" {
					failed++
					fmt.Fprintf(g.stderr, "dbfork: could not remove instance %s: %s\n", r.ID, r.Error)
					continue
				}
				fmt.Fprintf(g.stdout, "removed instance %s: %s\n", r.ID, r.Reason)
			}
			if failed > 0 {
				return fmt.Errorf("gc could not remove %d leftovers (see above)", failed)
			}
			if len(builds)+len(insts)+len(fetches)+len(expired) == 0 {
				fmt.Fprintln(g.stdout, "nothing to remove")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also stop live instances made by `dbfork up`")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	exp.add(cmd)
	return cmd
}
