package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine"
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

// relationNames maps data-dir paths to table names: MariaDB/MySQL files
// are named after their tables; PostgreSQL's are looked up in the running
// instance's catalog (its own database only). Best effort: unknown paths
// get no name.
func relationNames(ctx context.Context, st *instance.State) func(string) string {
	none := func(string) string { return "" }
	if byPath := engine.TraitsOf(st.Engine).TableOfFile; byPath != nil {
		return byPath
	}
	if st.Conn == nil || !st.Alive() {
		return none
	}
	c, err := pgx.Connect(ctx, st.Conn.URL)
	if err != nil {
		return none
	}
	defer c.Close(context.Background())
	var dbOID uint32
	if err := c.QueryRow(ctx, "SELECT oid FROM pg_database WHERE datname = current_database()").Scan(&dbOID); err != nil {
		return none
	}
	rows, err := c.Query(ctx, "SELECT pg_relation_filenode(oid)::text, relname FROM pg_class WHERE pg_relation_filenode(oid) IS NOT NULL")
	if err != nil {
		return none
	}
	byNode := map[string]string{}
	for rows.Next() {
		var node, name string
		if rows.Scan(&node, &name) == nil {
			byNode[node] = name
		}
	}
	rows.Close()
	prefix := fmt.Sprintf("base/%d/", dbOID)
	return func(p string) string {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			return ""
		}
		// 16384, 16384.1 (segments), 16384_fsm, 16384_vm
		node := strings.FieldsFunc(rest, func(r rune) bool { return r == '.' || r == '_' })
		if len(node) == 0 {
			return ""
		}
		name := byNode[node[0]]
		if name != "" && strings.Contains(rest, "_") {
			name += " (" + rest[strings.IndexByte(rest, '_')+1:] + ")"
		}
		return name
	}
}
