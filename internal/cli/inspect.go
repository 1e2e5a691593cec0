package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
)

func newInspectCmd(g *globals) *cobra.Command {
	var asJSON bool
	var top int
	cmd := &cobra.Command{
		Use:   "inspect ID",
		Short: "Show which files (and tables) an instance copied up or changed, and what that costs on disk",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errs.Invalid("inspect takes one instance id (see `dbfork ls`)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			id, err := instance.Resolve(s, args[0])
			if err != nil {
				return err
			}
			st, err := instance.Load(s, id)
			if err != nil {
				return err
			}
			gd, err := golden.Lookup(s, st.Key)
			if err != nil {
				return err
			}
			u, err := instance.Inspect(st, gd.DataDir())
			if err != nil {
				return err
			}
			names := relationNames(cmd.Context(), st)
			for i := range u.Files {
				u.Files[i].Relation = names(u.Files[i].Path)
			}
			if asJSON {
				return printJSON(g.stdout, u)
			}
			fmt.Fprintf(g.stdout, "instance %s (%s): owns %s of its own in %d files\n", u.ID, u.Backend, humanBytes(u.PrivateBytes), len(u.Files))
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "OWN\tSIZE\tHOW\tFILE\tRELATION")
			for i, f := range u.Files {
				if top > 0 && i == top {
					fmt.Fprintf(w, "…\t\t\t%d more (--top 0 for all)\t\n", len(u.Files)-top)
					break
				}
				how := "changed"
				switch {
				case f.New:
					how = "new"
				case f.CopiedUp:
					how = "copied up"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", humanBytes(f.PrivateBytes), humanBytes(f.Size), how, f.Path, f.Relation)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&top, "top", 20, "show the N files that own the most (0: all)")
	return cmd
}

// relationNames maps data-dir paths to table names, as the instance's
// engine knows how (best effort: "" for unknown paths).
func relationNames(ctx context.Context, st *instance.State) func(string) string {
	e, err := engines.Lookup(st.Engine)
	if err != nil {
		return func(string) string { return "" }
	}
	return e.RelationNames(ctx, st.Conn, st.Alive())
}
