package cli

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/store"
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
			views, err := instanceViews(cmd.Context(), g, s)
			if err != nil {
				return err
			}
			if n := golden.Unreadable(s); n > 0 {
				fmt.Fprintf(g.stderr, "dbfork: %d golden(s) in %s are root-only; `sudo dbfork ls` shows them\n", n, s.GoldensDir())
			}
			if asJSON {
				return printLsJSON(g, goldens, views)
			}
			return printLsTable(g, goldens, views)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// instanceViews lists the store's instances, marking those the store's
// daemon (if one runs) has leased out. Records this user cannot read (a
// root daemon's) are shown from the daemon's word for its leases, and the
// rest are counted on stderr.
func instanceViews(ctx context.Context, g *globals, s *store.Store) ([]instance.View, error) {
	insts, err := instance.List(s)
	if err != nil {
		return nil, err
	}
	leased := map[string]api.Lease{}
	if c, err := api.Dial(ctx, api.SocketPath(s.Root)); err == nil {
		if ls, err := c.Leases(ctx); err == nil {
			for _, l := range ls {
				leased[l.ID] = l
			}
		}
	}
	views := make([]instance.View, 0, len(insts))
	seen := map[string]bool{}
	for _, st := range insts {
		v := st.Public()
		if l, ok := leased[v.ID]; ok {
			v.LeasedBy = l.HolderPID
			v.Status = "leased"
		}
		views = append(views, v)
		seen[st.ID] = true
	}
	hidden := 0
	for _, id := range instance.IDs(s) {
		if seen[id] {
			continue
		}
		if l, ok := leased[id]; ok {
			v := leaseView(&l)
			v.Status = "leased"
			views = append(views, v)
			continue
		}
		hidden++
	}
	if hidden > 0 {
		fmt.Fprintf(g.stderr, "dbfork: %d instance(s) in %s are not readable by you (uid %d); `sudo dbfork ls` shows them\n", hidden, s.InstancesDir(), os.Geteuid())
	}
	return views, nil
}

func printLsJSON(g *globals, goldens []*golden.Golden, views []instance.View) error {
	type gv struct {
		Key           string    `json:"key"`
		Engine        string    `json:"engine"`
		EngineVersion string    `json:"engine_version"`
		Recipe        string    `json:"recipe"`
		TotalBytes    int64     `json:"total_bytes"`
		DiskBytes     int64     `json:"disk_bytes"` // on disk, blocks shared within the golden once
		Created       time.Time `json:"created"`
		Dir           string    `json:"dir"`
		Origin        string    `json:"origin"` // "build", or where it was pulled or imported from
		// Intermediate: the saved state after a load step, for builds to
		// start from; never cloned.
		Intermediate *golden.StepState `json:"intermediate,omitempty"`
	}
	out := struct {
		Goldens   []gv            `json:"goldens"`
		Instances []instance.View `json:"instances"`
	}{Goldens: []gv{}, Instances: []instance.View{}}
	for _, x := range goldens {
		m := x.Manifest
		out.Goldens = append(out.Goldens, gv{x.Key, m.Engine, m.EngineVersion, m.Recipe, m.TotalBytes, m.Disk(), m.Created, x.Dir, golden.Origin(x), m.Intermediate})
	}
	out.Instances = append(out.Instances, views...)
	return printJSON(g.stdout, out)
}

func printLsTable(g *globals, goldens []*golden.Golden, views []instance.View) error {
	w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GOLDEN\tENGINE\tDISK\tCREATED\tRECIPE\tORIGIN")
	for _, x := range goldens {
		m := x.Manifest
		recipe := m.Recipe
		if st := m.Intermediate; st != nil {
			recipe += fmt.Sprintf(" (intermediate: after step %d/%d)", st.Step, st.Steps)
		}
		fmt.Fprintf(w, "%s\t%s %s\t%s\t%s\t%s\t%s\n", x.Key[:12], m.Engine, shortVersion(m.EngineVersion),
			humanBytes(m.Disk()), m.Created.Local().Format("2006-01-02 15:04"), recipe, shortOrigin(golden.Origin(x)))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "INSTANCE\tGOLDEN\tBACKEND\tSTATUS\tPORT\tDSN")
	for _, v := range views {
		key := v.Golden
		if len(key) > 12 {
			key = key[:12]
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\n", v.ID, key, v.Backend, v.Status, v.Port, v.DSN)
	}
	return w.Flush()
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
// Each engine's driver reads its own banner.
func shortVersion(v string) string { return engine.ShortVersion(v) }

// shortOrigin shortens the key tags and digests in a golden's origin.
func shortOrigin(o string) string {
	return longHex.ReplaceAllStringFunc(o, func(h string) string { return h[:12] + "…" })
}

var longHex = regexp.MustCompile(`[0-9a-f]{64}`)
