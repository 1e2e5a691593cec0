package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/bench"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// benchPoolFlags are `dbfork bench pool`'s flags.
type benchPoolFlags struct {
	file, clientsFlag, backendName, mode string
	cycles, minFlag, maxFlag             int
	asJSON                               bool
	think                                time.Duration
	floor                                bool
}

func newBenchPoolCmd(g *globals) *cobra.Command {
	f := &benchPoolFlags{}
	cmd := &cobra.Command{
		Use:   "pool [-f dbfork.toml] [--clients 1,4,8] [--cycles 50] [--mode release|reset|database|fresh]",
		Short: "Acquire latency (p50/p99) from a warm pool with 1, 4 and 8 concurrent clients doing acquire/write/release",
		Long: `Each client repeats: acquire a lease, insert a row, check that no other
client's row is visible, release. Uses the store's running ` + "`dbfork serve`" + `, or
starts a private one for the run. Pool size per scenario: --min (default:
the number of clients) and --max (default: twice that in release mode, the
number of clients in the others).

--mode fresh: each client holds one lease and repeats the daemon's fresh
call (a slot of a golden built with [fresh] slots, else what the lease
has), write, check; the pool may hold twice the clients, so leases low on
slots find replacements ready. --mode reset: each client holds one lease and repeats reset (in place),
write, check. --mode database: the same with a fresh database cloned
inside the server per cycle (PostgreSQL 18 on a store that shares
extents), dropped after it. The latency columns are then the reset or
create-database call.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return f.run(cmd.Context(), g) },
	}
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().StringVar(&f.clientsFlag, "clients", "1,4,8", "concurrent client counts, one scenario each")
	cmd.Flags().IntVar(&f.cycles, "cycles", 50, "acquire/write/release cycles per client")
	cmd.Flags().IntVar(&f.minFlag, "min", -1, "pool min (default: the number of clients)")
	cmd.Flags().IntVar(&f.maxFlag, "max", 0, "pool max (default: twice the number of clients; in reset and database modes the number of clients)")
	cmd.Flags().StringVar(&f.backendName, "backend", "auto", "clone backend")
	cmd.Flags().StringVar(&f.mode, "mode", "release", "what a cycle does: release (acquire/release), reset (in place), database (a fresh database in the server) or fresh (the daemon's fresh call: a slot of the golden first)")
	cmd.Flags().BoolVar(&f.floor, "floor", false, "with --mode fresh/reset/database: also time a no-op call to the daemon before each cycle's call, the least any answer waits at this load (printed as the floor)")
	cmd.Flags().DurationVar(&f.think, "think", 0, "time each cycle spends on its data after the write, as a test's own work would (e.g. 50ms)")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
	return cmd
}

// parse checks the flags and returns the client counts and the recipe's
// absolute path.
func (f *benchPoolFlags) parse() ([]int, string, error) {
	var clients []int
	for _, part := range strings.Split(f.clientsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 || n > 256 {
			return nil, "", errs.Invalid("--clients %q: give a comma-separated list of counts between 1 and 256", f.clientsFlag)
		}
		clients = append(clients, n)
	}
	if f.cycles < 1 {
		return nil, "", errs.Invalid("--cycles %d: need at least 1", f.cycles)
	}
	if f.think < 0 {
		return nil, "", errs.Invalid("--think %v: give a duration of 0 or more (e.g. 50ms)", f.think)
	}
	if f.mode != "release" && f.mode != bench.ModeReset && f.mode != bench.ModeDatabase && f.mode != bench.ModeFresh {
		return nil, "", errs.Invalid("--mode %q: use release, reset, database or fresh", f.mode)
	}
	if f.floor && f.mode == "release" {
		return nil, "", errs.Invalid("--floor times a no-op call beside each cycle's fresh-data call, and --mode release makes none: use it with --mode fresh, reset or database")
	}
	abs, err := project.RecipePath(f.file)
	if err != nil {
		return nil, "", err
	}
	if _, err := project.LoadRecipe(context.Background(), abs); err != nil {
		return nil, "", err
	}
	return clients, abs, nil
}

func (f *benchPoolFlags) run(ctx context.Context, g *globals) error {
	clients, abs, err := f.parse()
	if err != nil {
		return err
	}
	s, err := g.openStore()
	if err != nil {
		return err
	}
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
	var relRes []*bench.PoolResult
	op := map[string]string{"release": "acquire", bench.ModeReset: "reset", bench.ModeDatabase: "create db", bench.ModeFresh: "fresh"}[f.mode]
	if !f.asJSON && f.think > 0 {
		fmt.Fprintf(g.stdout, "each cycle spends %v on its data after the write (--think)\n", f.think)
	}
	if !f.asJSON {
		fmt.Fprintf(g.stdout, "%-8s %8s %12s %12s %12s %12s %10s %9s\n", "clients", "cycles", op+" p50", op+" p99", op+" max", "write p50", "cycles/s", "isolated")
	}
	for _, n := range clients {
		r, fr, err := f.scenario(ctx, c, abs, n)
		if err != nil {
			return err
		}
		if fr != nil {
			results = append(results, fr)
			freshRes = append(freshRes, fr)
		} else {
			results = append(results, r)
			relRes = append(relRes, r)
		}
		if !f.asJSON {
			fmt.Fprintf(g.stdout, "%-8d %8d %10.1fms %10.1fms %10.1fms %10.1fms %10.1f %9v\n", r.Clients, r.Cycles, r.P50Ms, r.P99Ms, r.MaxMs, r.WriteP50, r.PerSecond, r.Isolated)
		}
		if !r.Isolated {
			return fmt.Errorf("isolation broken: a client saw another client's row")
		}
	}
	if f.asJSON {
		return printJSON(g.stdout, map[string]any{"recipe": abs, "mode": f.mode, "results": results})
	}
	for _, fr := range freshRes {
		printSteps(g, fr)
	}
	for _, r := range relRes {
		printReadySteps(g, r)
	}
	return nil
}

// printReadySteps says how a release scenario's instances were made.
func printReadySteps(g *globals, r *bench.PoolResult) {
	if len(r.ReadySteps) == 0 {
		return
	}
	fmt.Fprintf(g.stdout, "  %d clients, release: %d of %d leases recycled; making an instance p50", r.Clients, r.Recycled, r.Acquires)
	keys := make([]string, 0, len(r.ReadySteps))
	for k := range r.ReadySteps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(g.stdout, "; %s %.1f", k, r.ReadySteps[k])
	}
	fmt.Fprintln(g.stdout, " ms")
}

// scenario warms the pool for n clients and runs them; fr is set in the
// reset and database modes.
func (f *benchPoolFlags) scenario(ctx context.Context, c *api.Client, abs string, n int) (r *bench.PoolResult, fr *bench.FreshResult, err error) {
	lo, hi := n, 2*n
	if f.mode != "release" {
		// Each client holds one lease for the whole scenario, as a
		// test session's workers do: instances beyond those would
		// only be made (and prewarmed) on the same cores while the
		// clients measure. With 8 workers and a recipe's default
		// [pool] max = 8 a session's daemon makes none either. A
		// golden with slots gets each lease's next instance from the
		// pool's ahead share (default: max), past max.
		hi = n
	}
	if f.minFlag >= 0 {
		lo = f.minFlag
	}
	if f.maxFlag > 0 {
		hi = f.maxFlag
	} else {
		hi = max(hi, lo) // a --min above the clients raises the default max
	}
	if err := warmPool(ctx, c, abs, f.backendName, lo, hi); err != nil {
		return nil, nil, err
	}
	req := api.AcquireRequest{Recipe: abs, Backend: f.backendName, Min: &lo, Max: &hi}
	if f.mode == "release" {
		r, err := bench.Pool(ctx, c, req, n, f.cycles, f.think)
		return r, nil, err
	}
	fr, err = bench.Fresh(ctx, c, req, f.mode, n, f.cycles, bench.FreshOptions{Think: f.think, Floor: f.floor})
	if err != nil {
		return nil, nil, err
	}
	return &fr.PoolResult, fr, nil
}

// printSteps says where a fresh-data scenario's time went.
func printSteps(g *globals, r *bench.FreshResult) {
	fmt.Fprintf(g.stdout, "  %d clients, %s: inside the daemon p50 %.1f p99 %.1f ms", r.Clients, r.Mode, r.ServerP50, r.ServerP99)
	for _, k := range r.StepNames() {
		fmt.Fprintf(g.stdout, "; %s %.1f", k, r.Steps[k])
	}
	if r.Mode == bench.ModeDatabase {
		fmt.Fprintf(g.stdout, "; cloned while the client waited: %d of %d", r.OnDemand, r.Acquires)
	}
	if len(r.Modes) > 0 {
		modes := make([]string, 0, len(r.Modes))
		for k := range r.Modes {
			modes = append(modes, k)
		}
		sort.Strings(modes)
		fmt.Fprint(g.stdout, "; modes")
		for _, k := range modes {
			fmt.Fprintf(g.stdout, " %s %d", k, r.Modes[k])
		}
	}
	fmt.Fprintf(g.stdout, "; %.1f/s per core (%d cores)", r.PerSecond/float64(runtime.NumCPU()), runtime.NumCPU())
	if r.FloorP99 > 0 {
		fmt.Fprintf(g.stdout, "; floor (a no-op call) p50 %.1f p99 %.1f ms", r.FloorP50, r.FloorP99)
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
	return bench.WaitPool(ctx, c, l.Pool, fmt.Sprintf("warm %d instances", lo), func(p api.PoolInfo) bool {
		return p.Ready >= lo && p.Discarding == 0
	})
}
