package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/bench"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// benchFlags are `dbfork bench`'s own flags.
type benchFlags struct {
	engineName, sizes, methods, outFile string
	runs, workClients                   int
	workload                            time.Duration
	asJSON, prewarm                     bool
}

func newBenchCmd(g *globals) *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench [--engine postgres|mariadb] [--sizes 100M,1G] [--runs 3]",
		Short: "Clone and first-write figures for every backend that works here, next to a plain copy and CREATE DATABASE … TEMPLATE",
		Long: `bench generates a dataset of each size (pgbench-style tables for
PostgreSQL, sysbench-style for MariaDB/MySQL, made by the server itself),
builds its golden (cached in the store), then for each run and each
method — every backend that works for the store, plus the baselines a
user would otherwise use — makes a clone, starts a server on it, times 10
single-row inserts into the largest table (one client command each) and
measures the disk the clone owns afterwards. The order of methods rotates
between runs. Figures are medians with min–max over the runs.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd.Context(), g) },
	}
	cmd.Flags().StringVar(&f.outFile, "out", "", "also write the results as JSON to this file and a PNG plot beside it (same name, .png)")
	cmd.Flags().StringVar(&f.engineName, "engine", "postgres", "postgres, mariadb or mysql")
	cmd.Flags().StringVar(&f.sizes, "sizes", "100M", "dataset sizes, e.g. 100M,1G,5G")
	cmd.Flags().StringVar(&f.methods, "methods", "", "comma-separated methods (default: every backend that works here, copy, and for PostgreSQL template:wal_log,template:file_copy)")
	cmd.Flags().IntVar(&f.runs, "runs", 3, "repetitions of every method")
	cmd.Flags().DurationVar(&f.workload, "workload", 10*time.Second, "steady-state update workload per clone after the first writes (0 to skip)")
	cmd.Flags().IntVar(&f.workClients, "workload-clients", 2, "connections running the workload")
	cmd.Flags().BoolVar(&f.prewarm, "prewarm", false, "read each clone once before measuring it (what the pool does before a lease)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
	cmd.AddCommand(newBenchPoolCmd(g))
	return cmd
}

// parse checks the flags and returns the dataset sizes and methods.
func (f *benchFlags) parse() ([]int64, []string, error) {
	if f.runs < 1 || f.runs > 100 {
		return nil, nil, errs.Invalid("--runs %d: give 1 to 100", f.runs)
	}
	if f.workload < 0 || f.workClients < 1 || f.workClients > 64 {
		return nil, nil, errs.Invalid("--workload %s --workload-clients %d: need a duration >= 0 and 1 to 64 clients", f.workload, f.workClients)
	}
	var sz []int64
	for _, part := range strings.Split(f.sizes, ",") {
		n, err := bench.ParseSize(part)
		if err != nil {
			return nil, nil, err
		}
		sz = append(sz, n)
	}
	var ms []string
	if f.methods != "" {
		ms = strings.Split(f.methods, ",")
	}
	return sz, ms, nil
}

func (f *benchFlags) run(ctx context.Context, g *globals) error {
	sz, ms, err := f.parse()
	if err != nil {
		return err
	}
	s, err := g.openStore()
	if err != nil {
		return err
	}
	var all []*bench.CloneResult
	for _, n := range sz {
		res, err := f.cloneBench(ctx, g, s, n, ms)
		if err != nil {
			return err
		}
		all = append(all, res)
		if !f.asJSON {
			printClone(g, res)
		}
	}
	if f.outFile != "" {
		if err := f.writeOut(g, all, sz); err != nil {
			return err
		}
	}
	if f.asJSON {
		return printJSON(g.stdout, map[string]any{"results": all})
	}
	return nil
}

// cloneBench measures every method on a dataset of n bytes.
func (f *benchFlags) cloneBench(ctx context.Context, g *globals, s *store.Store, n int64, ms []string) (*bench.CloneResult, error) {
	ds, err := bench.WriteDataset(filepath.Join(s.Root, "bench", f.engineName+"-"+bench.FormatSize(n)), f.engineName, n)
	if err != nil {
		return nil, err
	}
	// Bench goldens are the bench's own: no [cache], no progress of builds.
	p := project.New(project.Options{Store: s, Open: g.openEngine(s)})
	return bench.Clone(ctx, p, ds, bench.CloneOptions{Runs: f.runs, Methods: ms, Progress: progress.New(g.stderr),
		Workload: f.workload, WorkloadClients: f.workClients, Prewarm: f.prewarm})
}

// writeOut writes the results as JSON to --out and a plot beside it.
func (f *benchFlags) writeOut(g *globals, all []*bench.CloneResult, sz []int64) error {
	data, err := json.MarshalIndent(map[string]any{"results": all}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(f.outFile, append(data, '\n'), 0o644); err != nil {
		return err
	}
	png := strings.TrimSuffix(f.outFile, filepath.Ext(f.outFile)) + ".png"
	if err := bench.Plot(all, sz, png); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	fmt.Fprintf(g.stderr, "dbfork bench: wrote %s and %s\n", f.outFile, png)
	return nil
}

func printClone(g *globals, r *bench.CloneResult) {
	fmt.Fprintf(g.stdout, "\n%s, %s (golden %.0f MiB, %d rows in %s), auto picks %s; median (min–max) of %d runs\n",
		r.Engine+" "+shortVersion(r.Version), r.Size, float64(r.GoldenBytes)/(1<<20), r.Rows, r.Table, r.Auto, r.Runs)
	work := false
	for _, m := range r.Methods {
		work = work || m.TPS.Max > 0
	}
	cols := []string{"method", "clone ms", "clone+ready ms", "1st write ms", "later writes ms", "clone owns MiB"}
	if work {
		cols = append(cols, "workload tps", "workload max ms", "owns after MiB")
	}
	row := func(cells []string) {
		fmt.Fprintf(g.stdout, "%-20s", cells[0])
		for _, c := range cells[1:] {
			fmt.Fprintf(g.stdout, " %-22s", c)
		}
		fmt.Fprintln(g.stdout)
	}
	row(cols)
	f := func(s bench.Stat) string {
		return fmt.Sprintf("%.1f (%.1f–%.1f)", s.Median, s.Min, s.Max)
	}
	for _, m := range r.Methods {
		name := m.Method
		if m.Baseline {
			name += " *"
		}
		cells := []string{name, f(m.Clone), f(m.Ready), f(m.FirstWrite), f(m.LaterWrite), f(m.PrivateMiB)}
		if work {
			cells = append(cells, f(m.TPS), f(m.WorkMaxMs), f(m.WorkPrivMiB))
		}
		row(cells)
	}
	fmt.Fprintln(g.stdout, "* baseline: what a user does without dbfork")
}
