package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
)

func newResetCmd(g *globals) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "reset ID",
		Short: "Take an instance back to its golden in place: same DSN, the golden's data; open connections break",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errs.Invalid("reset takes one instance id (see `dbfork ls`), got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := g.openStore()
			if err != nil {
				return err
			}
			id, err := instance.Resolve(s, args[0])
			if err != nil {
				return err
			}
			// A leased instance belongs to the store's daemon: reset it there.
			c, err := api.Dial(ctx, api.SocketPath(s.Root))
			if err == nil {
				l, err := c.Reset(ctx, id)
				if err == nil {
					return printReset(g, asJSON, leaseView(l), l.ResetMs)
				}
				if !errors.Is(err, errs.ErrNotFound) {
					return err
				}
			} else {
				c = nil
			}
			st, err := instance.Load(s, id)
			if err != nil && c != nil && file == "" {
				// Kept through the daemon for us (`up` as a user on
				// root's store): its record is the daemon's, which we
				// may not read; the daemon resets it for its owner.
				l, derr := c.ResetKept(ctx, id)
				if derr == nil {
					return printReset(g, asJSON, leaseView(l), l.ResetMs)
				}
				if !errors.Is(derr, errs.ErrNotFound) {
					return derr
				}
				if errors.Is(err, fs.ErrPermission) {
					return derr
				}
			}
			if err != nil {
				return err
			}
			if file == "" {
				file = st.Recipe
			}
			if file == "" {
				return errs.Invalid("instance %s does not record its recipe: give it with -f", id)
			}
			r, err := loadRecipe(file)
			if err != nil {
				return err
			}
			eng, err := g.project(s, registryFlags{}).Engine(ctx, r)
			if err != nil {
				return err
			}
			gl, err := golden.Lookup(s, st.Key)
			if err != nil {
				return err
			}
			if v, err := eng.Version(ctx); err != nil || v != gl.Manifest.EngineVersion {
				return errs.Invalid("recipe %s runs %s %s, but instance %s is a clone of a %s golden: give its own recipe with -f", file, eng.Name(), v, id, gl.Manifest.EngineVersion)
			}
			st, err = instance.ResetByID(ctx, s, id, eng, gl)
			if err != nil {
				return err
			}
			return printReset(g, asJSON, st.Public(), st.ResetMs)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe to start the server with (default: the one the instance was made from)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printReset(g *globals, asJSON bool, v instance.View, ms float64) error {
	if asJSON {
		return printJSON(g.stdout, struct {
			instance.View
			ResetMs float64 `json:"reset_ms"`
		}{v, ms})
	}
	fmt.Fprintf(g.stdout, "reset %s in %.0f ms: %s\n", v.ID, ms, v.DSN)
	return nil
}
