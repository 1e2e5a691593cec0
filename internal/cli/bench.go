package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/bench"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

func newBenchCmd(g *globals) *cobra.Command {
	var engineName, sizes, methods, outFile string
	var runs, workClients int
	var workload time.Duration
	var asJSON, prewarm bool
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
		RunE: func(cmd *cobra.Command, args []string) error {
			if runs < 1 || runs > 100 {
				return errs.Invalid("--runs %d: give 1 to 100", runs)
			}
			if workload < 0 || workClients < 1 || workClients > 64 {
				return errs.Invalid("--workload %s --workload-clients %d: need a duration >= 0 and 1 to 64 clients", workload, workClients)
			}
			var sz []int64
			for _, f := range strings.Split(sizes, ",") {
				n, err := bench.ParseSize(f)
				if err != nil {
					return err
				}
				sz = append(sz, n)
			}
			var ms []string
			if methods != "" {
				ms = strings.Split(methods, ",")
			}
			s, err := g.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var all []*bench.CloneResult
			for _, n := range sz {
				ds, err := bench.WriteDataset(filepath.Join(s.Root, "bench", engineName+"-"+bench.FormatSize(n)), engineName, n)
				if err != nil {
					return err
				}
				r, err := recipe.Load(ds.Recipe)
				if err != nil {
					return err
				}
				eng, err := g.openEngine(s)(ctx, golden.EngineWant(r))
				if err != nil {
					return err
				}
				res, err := bench.Clone(ctx, s, eng, ds, bench.CloneOptions{Runs: runs, Methods: ms, Progress: progress.New(g.stderr),
					Workload: workload, WorkloadClients: workClients, Prewarm: prewarm})
				if err != nil {
					return err
				}
				all = append(all, res)
				if !asJSON {
					printClone(g, res)
				}
			}
			if outFile != "" {
				data, err := json.MarshalIndent(map[string]any{"results": all}, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(outFile, append(data, '\n'), 0o644); err != nil {
					return err
				}
				png := strings.TrimSuffix(outFile, filepath.Ext(outFile)) + ".png"
				if err := bench.Plot(all, sz, png); err != nil {
					return fmt.Errorf("plot: %w", err)
				}
				fmt.Fprintf(g.stderr, "dbfork bench: wrote %s and %s\n", outFile, png)
			}
			if asJSON {
				return printJSON(g.stdout, map[string]any{"results": all})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&outFile, "out", "", "also write the results as JSON to this file and a PNG plot beside it (same name, .png)")
	cmd.Flags().StringVar(&engineName, "engine", "postgres", "postgres, mariadb or mysql")
	cmd.Flags().StringVar(&sizes, "sizes", "100M", "dataset sizes, e.g. 100M,1G,5G")
	cmd.Flags().StringVar(&methods, "methods", "", "comma-separated methods (default: every backend that works here, copy, and for PostgreSQL template:wal_log,template:file_copy)")
	cmd.Flags().IntVar(&runs, "runs", 3, "repetitions of every method")
	cmd.Flags().DurationVar(&workload, "workload", 10*time.Second, "steady-state update workload per clone after the first writes (0 to skip)")
	cmd.Flags().IntVar(&workClients, "workload-clients", 2, "connections running the workload")
	cmd.Flags().BoolVar(&prewarm, "prewarm", false, "read each clone once before measuring it (what the pool does before a lease)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(newBenchPoolCmd(g))
	return cmd
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

func newBenchPoolCmd(g *globals) *cobra.Command {
	var file, clientsFlag, backendName, mode string
	var cycles, minFlag, maxFlag int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pool [-f dbfork.toml] [--clients 1,4,8] [--cycles 50] [--mode release|reset|database]",
		Short: "Acquire latency (p50/p99) from a warm pool with 1, 4 and 8 concurrent clients doing acquire/write/release",
		Long: `Each client repeats: acquire a lease, insert a row, check that no other
client's row is visible, release. Uses the store's running ` + "`dbfork serve`" + `, or
starts a private one for the run. Pool size per scenario: --min (default:
the number of clients) and --max (default: twice that).

--mode reset: each client holds one lease and repeats reset (in place),
write, check. --mode database: the same with a fresh database cloned
inside the server per cycle (PostgreSQL 18 on a store that shares
extents), dropped after it. The latency columns are then the reset or
create-database call.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var clients []int
			for _, f := range strings.Split(clientsFlag, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 || n > 256 {
					return errs.Invalid("--clients %q: give a comma-separated list of counts between 1 and 256", clientsFlag)
				}
				clients = append(clients, n)
			}
			if cycles < 1 {
				return errs.Invalid("--cycles %d: need at least 1", cycles)
			}
			if mode != "release" && mode != bench.ModeReset && mode != bench.ModeDatabase {
				return errs.Invalid("--mode %q: use release, reset or database", mode)
			}
			if file == "" {
				file = recipe.DefaultFile
			}
			abs, err := filepath.Abs(file)
			if err != nil {
				return err
			}
			if _, err := recipe.Load(abs); err != nil {
				return err
			}
			s, err := g.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			c, stop, err := benchDaemon(ctx, g, s)
			if err != nil {
				return err
			}
			defer stop()
			if _, err := c.EnsureGolden(ctx, api.GoldenRequest{Recipe: abs}); err != nil {
				return err
			}
			var results []any
			var freshRes []*bench.FreshResult
			op := map[string]string{"release": "acquire", bench.ModeReset: "reset", bench.ModeDatabase: "create db"}[mode]
			if !asJSON {
				fmt.Fprintf(g.stdout, "%-8s %8s %12s %12s %12s %12s %10s %9s\n", "clients", "cycles", op+" p50", op+" p99", op+" max", "write p50", "cycles/s", "isolated")
			}
			for _, n := range clients {
				lo, hi := n, 2*n
				if minFlag >= 0 {
					lo = minFlag
				}
				if maxFlag > 0 {
					hi = maxFlag
				}
				if err := warmPool(ctx, c, abs, backendName, lo, hi); err != nil {
					return err
				}
				req := api.AcquireRequest{Recipe: abs, Backend: backendName, Min: &lo, Max: &hi}
				var r *bench.PoolResult
				if mode == "release" {
					if r, err = bench.Pool(ctx, c, req, n, cycles); err != nil {
						return err
					}
					results = append(results, r)
				} else {
					fr, err := bench.Fresh(ctx, c, req, mode, n, cycles)
					if err != nil {
						return err
					}
					r = &fr.PoolResult
					results = append(results, fr)
					freshRes = append(freshRes, fr)
				}
				if !asJSON {
					fmt.Fprintf(g.stdout, "%-8d %8d %10.1fms %10.1fms %10.1fms %10.1fms %10.1f %9v\n", r.Clients, r.Cycles, r.P50Ms, r.P99Ms, r.MaxMs, r.WriteP50, r.PerSecond, r.Isolated)
				}
				if !r.Isolated {
					return fmt.Errorf("isolation broken: a client saw another client's row")
				}
			}
			if asJSON {
				return printJSON(g.stdout, map[string]any{"recipe": abs, "mode": mode, "results": results})
			}
			for _, fr := range freshRes {
				printSteps(g, fr)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().StringVar(&clientsFlag, "clients", "1,4,8", "concurrent client counts, one scenario each")
	cmd.Flags().IntVar(&cycles, "cycles", 50, "acquire/write/release cycles per client")
	cmd.Flags().IntVar(&minFlag, "min", -1, "pool min (default: the number of clients)")
	cmd.Flags().IntVar(&maxFlag, "max", 0, "pool max (default: twice the number of clients)")
	cmd.Flags().StringVar(&backendName, "backend", "auto", "clone backend")
	cmd.Flags().StringVar(&mode, "mode", "release", "what a cycle does: release (acquire/release), reset (in place) or database (a fresh database in the server)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// printSteps says where a fresh-data scenario's time went.
func printSteps(g *globals, r *bench.FreshResult) {
	fmt.Fprintf(g.stdout, "  %d clients, %s: inside the daemon p50 %.1f ms", r.Clients, r.Mode, r.ServerP50)
	for _, k := range r.StepNames() {
		fmt.Fprintf(g.stdout, "; %s %.1f", k, r.Steps[k])
	}
	if r.Mode == bench.ModeDatabase {
		fmt.Fprintf(g.stdout, "; cloned while the client waited: %d of %d", r.OnDemand, r.Acquires)
	}
	fmt.Fprintln(g.stdout)
}

// benchDaemon returns a client of the store's daemon, or of a private one
// started for the bench (served on its own socket, stopped by stop).
func benchDaemon(ctx context.Context, g *globals, s *store.Store) (*api.Client, func(), error) {
	if c, err := api.Dial(ctx, api.SocketPath(s.Root)); err == nil {
		return c, func() {}, nil
	}
	d := daemon.New(daemon.Options{Store: s, Log: g.log, OpenEngine: g.openEngine(s)})
	sock := filepath.Join(s.Root, fmt.Sprintf("bench-%d.sock", os.Getpid()))
	ln, err := net.Listen("unix", sock)
	if err != nil {
		_ = d.Close(context.Background())
		return nil, nil, err
	}
	srv := api.NewServer(d, "", g.log)
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			g.log.Error("stop bench daemon", "err", err)
		}
		_ = srv.Shutdown(ctx)
		_ = os.Remove(sock)
	}
	c, err := api.Dial(ctx, sock)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// warmPool sizes the recipe's pool and waits until min instances are ready.
func warmPool(ctx context.Context, c *api.Client, recipePath, backendName string, lo, hi int) error {
	l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: recipePath, Backend: backendName, Min: &lo, Max: &hi})
	if err != nil {
		return err
	}
	if err := c.Release(ctx, l.ID); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		ps, err := c.Pools(ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.ID == l.Pool && p.Ready >= lo && p.Discarding == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return errs.Busy("pool did not warm %d instances within 5 minutes", lo)
}
