package cli

import (
	"fmt"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
)

func newLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List goldens and instances in the store",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			goldens, err := golden.List(s)
			if err != nil {
				return err
			}
			insts, err := instance.List(s)
			if err != nil {
				return err
			}
			// Ask the store's daemon, if one runs, which instances are leased.
			leased := map[string]int{}
			if c, err := api.Dial(cmd.Context(), api.SocketPath(s.Root)); err == nil {
				if ls, err := c.Leases(cmd.Context()); err == nil {
					for _, l := range ls {
						leased[l.ID] = l.HolderPID
					}
				}
			}
			view := func(st *instance.State) instance.View {
				v := st.Public()
				if pid, ok := leased[v.ID]; ok {
					v.LeasedBy = pid
					v.Status = "leased"
				}
				return v
			}
			if asJSON {
				type gv struct {
					Key           string    `json:"key"`
					Engine        string    `json:"engine"`
					EngineVersion string    `json:"engine_version"`
					Recipe        string    `json:"recipe"`
					TotalBytes    int64     `json:"total_bytes"`
					Created       time.Time `json:"created"`
					Dir           string    `json:"dir"`
				}
				out := struct {
					Goldens   []gv            `json:"goldens"`
					Instances []instance.View `json:"instances"`
				}{Goldens: []gv{}, Instances: []instance.View{}}
				for _, x := range goldens {
					m := x.Manifest
					out.Goldens = append(out.Goldens, gv{x.Key, m.Engine, m.EngineVersion, m.Recipe, m.TotalBytes, m.Created, x.Dir})
				}
				for _, st := range insts {
					out.Instances = append(out.Instances, view(st))
				}
				return printJSON(g.stdout, out)
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "GOLDEN\tENGINE\tSIZE\tCREATED\tRECIPE")
			for _, x := range goldens {
				m := x.Manifest
				fmt.Fprintf(w, "%s\t%s %s\t%s\t%s\t%s\n", x.Key[:12], m.Engine, shortVersion(m.EngineVersion),
					humanBytes(m.TotalBytes), m.Created.Local().Format("2006-01-02 15:04"), m.Recipe)
			}
			fmt.Fprintln(w)
			fmt.Fprintln(w, "INSTANCE\tGOLDEN\tBACKEND\tSTATUS\tPORT\tDSN")
			for _, st := range insts {
				v := view(st)
				key := v.Golden
				if len(key) > 12 {
					key = key[:12]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", v.ID, key, v.Backend, v.Status, v.Port, v.DSN)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for x := n / unit; x >= unit; x /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// shortVersion turns "postgres (PostgreSQL) 15.18 (Debian ...)" into
// "15.18" and "/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-..." into "10.11.19".
func shortVersion(v string) string {
	if m := versionRe.FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return v
}

var versionRe = regexp.MustCompile(`(?:\(PostgreSQL\)|Ver) ([0-9]+(?:\.[0-9]+)+)`)
