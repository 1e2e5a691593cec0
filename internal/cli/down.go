package cli

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/instance"
)

func newDownCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "down ID... | --all",
		Short: "Stop instances, unmount and remove their clones",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return errs.Invalid("give instance ids or --all, not both and not neither (see `dbfork ls`)")
			}
			s, err := g.openStore()
			if err != nil {
				return err
			}
			var ids []string
			if all {
				insts, err := instance.List(s)
				if err != nil {
					return err
				}
				for _, st := range insts {
					ids = append(ids, st.ID)
				}
			} else {
				for _, a := range args {
					id, err := instance.Resolve(s, a)
					if err != nil {
						return err
					}
					ids = append(ids, id)
				}
			}
			// A leased instance belongs to the store's daemon: end the
			// lease there (it removes the instance).
			var daemon *api.Client
			if !all {
				daemon, _ = api.Dial(cmd.Context(), api.SocketPath(s.Root))
			}
			var failed error
			skipped := 0
			for _, id := range ids {
				if daemon != nil && daemon.Release(cmd.Context(), id) == nil {
					fmt.Fprintln(g.stdout, "released", id)
					continue
				}
				err := instance.Down(cmd.Context(), s, id)
				if err != nil && daemon != nil && !errors.Is(err, errs.ErrConflict) {
					// Kept through the daemon for us (`up` as a user on
					// root's store): its record is the daemon's, and so
					// is the removal.
					derr := daemon.DownKept(cmd.Context(), id)
					if derr == nil {
						fmt.Fprintln(g.stdout, "removed", id)
						continue
					}
					if !errors.Is(derr, errs.ErrNotFound) || errors.Is(err, fs.ErrPermission) {
						err = derr
					}
				}
				if all && errors.Is(err, errs.ErrNotFound) {
					continue // removed meanwhile by another dbfork: gone is what --all wants
				}
				if all && errors.Is(err, errs.ErrConflict) {
					fmt.Fprintf(g.stderr, "dbfork: skipped %s: in use by another dbfork process\n", id)
					skipped++
					continue
				}
				if err != nil {
					if failed == nil {
						failed = err
					}
					continue
				}
				fmt.Fprintln(g.stdout, "removed", id)
			}
			if failed == nil && skipped > 0 {
				// Not "all are down": say so with the exit status too.
				return errs.Conflict("%d instance(s) left running: they are in use by another dbfork process (a daemon's pool or lease, or a running `dbfork run`); `dbfork daemon stop` ends the daemon and its instances", skipped)
			}
			return failed
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "stop every instance not in use by another dbfork process")
	return cmd
}
