package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// Writes is how many single-row writes each sample times.
const Writes = 10

// Sample is one clone made and written to by one method.
type Sample struct {
	CloneMs      float64   `json:"clone_ms"`
	ReadyMs      float64   `json:"ready_ms"` // clone + server start + first query
	WritesMs     []float64 `json:"writes_ms"`
	PrivateBytes int64     `json:"private_bytes"` // disk the clone owns after the writes
	Workload     *Workload `json:"workload,omitempty"`
	PrewarmMs    float64   `json:"prewarm_ms,omitempty"`
}

// Stat is a median with its range over samples.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// MethodResult is every sample of one method, and their summary.
type MethodResult struct {
	Method      string   `json:"method"`
	Baseline    bool     `json:"baseline"` // what users do without dbfork
	Note        string   `json:"note,omitempty"`
	Samples     []Sample `json:"samples"`
	Clone       Stat     `json:"clone_ms"`
	Ready       Stat     `json:"ready_ms"`
	FirstWrite  Stat     `json:"first_write_ms"`
	LaterWrite  Stat     `json:"later_write_ms"` // per sample: the median of writes 2..10
	PrivateMiB  Stat     `json:"private_mib"`
	TPS         Stat     `json:"workload_tps"`
	WorkMaxMs   Stat     `json:"workload_max_ms"`
	WorkPrivMiB Stat     `json:"workload_private_mib"` // owned after the workload
}

// CloneResult is one engine and size.
type CloneResult struct {
	Engine      string         `json:"engine"`
	Version     string         `json:"version"`
	Size        string         `json:"size"`
	GoldenBytes int64          `json:"golden_bytes"`
	Golden      string         `json:"golden"`
	Table       string         `json:"table"`
	Rows        int64          `json:"rows"`
	Auto        string         `json:"auto"` // the backend `auto` picks here
	Runs        int            `json:"runs"`
	BuildS      float64        `json:"build_seconds,omitempty"`
	Methods     []MethodResult `json:"methods"`
}

// CloneOptions tune a clone benchmark.
type CloneOptions struct {
	Runs     int
	Methods  []string // empty: every backend that works here, plus the baselines
	Progress *progress.Reporter
	// Workload runs a steady-state update workload on each clone after
	// the first writes (0: skip), with WorkloadClients connections.
	Workload        time.Duration
	WorkloadClients int
	// Prewarm reads each clone once before measuring its writes, as the
	// pool does before handing an instance out.
	Prewarm bool
}

// Clone builds the dataset's golden in p's store and measures every
// method, Runs times, rotating the order each run so machine drift hits
// all alike.
func Clone(ctx context.Context, p *project.Project, ds *Dataset, o CloneOptions) (*CloneResult, error) {
	s := p.Store
	r, err := project.LoadRecipe(ctx, ds.Recipe)
	if err != nil {
		return nil, err
	}
	eng, err := p.Engine(ctx, r)
	if err != nil {
		return nil, err
	}
	kit, err := kitOf(ds.Engine)
	if err != nil {
		return nil, err
	}
	if err := checkSpace(ctx, p, eng, r, ds, o.Methods); err != nil {
		return nil, err
	}
	o.Progress.Step(fmt.Sprintf("golden: %s %s", ds.Engine, FormatSize(ds.Size)))
	t0 := time.Now()
	b, err := p.Golden(ctx, r)
	if err != nil {
		return nil, err
	}
	res, g := b.Result, b.Golden
	out := &CloneResult{Engine: ds.Engine, Version: g.Manifest.EngineVersion, Size: FormatSize(ds.Size),
		GoldenBytes: g.Manifest.TotalBytes, Golden: g.Key, Table: ds.Table, Rows: ds.Rows, Runs: o.Runs}
	if res.Built {
		out.BuildS = time.Since(t0).Seconds()
	}
	if b, _, err := backend.Select(ctx, "auto", s.InstancesDir(), g.DataDir()); err == nil {
		out.Auto = b.Name()
	}
	methods := o.Methods
	if len(methods) == 0 {
		methods = defaultMethods(ctx, s, g, kit)
	}
	byName, err := methodResults(methods, kit, ds.Engine)
	if err != nil {
		return nil, err
	}
	var host *instance.Instance // the server CREATE DATABASE … TEMPLATE runs on
	defer func() {
		if host != nil {
			_ = host.Destroy(context.Background(), s)
		}
	}()
	for run := 0; run < o.Runs; run++ {
		for i := range methods {
			m := methods[(i+run)%len(methods)]
			o.Progress.Step(fmt.Sprintf("%s %s: run %d/%d, %s", ds.Engine, FormatSize(ds.Size), run+1, o.Runs, m))
			var smp *Sample
			if strings.HasPrefix(m, "template:") {
				if host == nil {
					if host, err = p.Clone(ctx, b, instance.Options{Backend: "auto"}); err != nil {
						return nil, fmt.Errorf("template host: %w", err)
					}
				}
				smp, err = templateSample(ctx, host, ds, strings.TrimPrefix(m, "template:"), run, o)
			} else {
				smp, err = cloneSample(ctx, p, b, ds, m, o)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m, err)
			}
			byName[m].Samples = append(byName[m].Samples, *smp)
		}
	}
	o.Progress.Done(false)
	for _, m := range methods {
		mr := byName[m]
		mr.summarize()
		out.Methods = append(out.Methods, *mr)
	}
	return out, nil
}

// defaultMethods are every backend that works for the store, the plain
// copy among them, and the engine's TEMPLATE strategies.
func defaultMethods(ctx context.Context, s *store.Store, g *golden.Golden, kit engine.BenchKit) []string {
	var methods []string
	for _, n := range backend.Names {
		if _, _, err := backend.Select(ctx, n, s.InstancesDir(), g.DataDir()); err == nil {
			methods = append(methods, n)
		}
	}
	for _, st := range kit.TemplateStrategies {
		methods = append(methods, "template:"+st)
	}
	return methods
}

// methodResults checks each method and starts its result.
func methodResults(methods []string, kit engine.BenchKit, engineName string) (map[string]*MethodResult, error) {
	byName := map[string]*MethodResult{}
	for _, m := range methods {
		mr := &MethodResult{Method: m}
		switch {
		case fullCopy(m):
			mr.Baseline, mr.Note = true, "plain copy of the data dir, then a server on it"
		case strings.HasPrefix(m, "template:"):
			mr.Baseline, mr.Note = true, "CREATE DATABASE … TEMPLATE on a running server (STRATEGY "+strings.ToUpper(strings.TrimPrefix(m, "template:"))+")"
			if !slices.Contains(kit.TemplateStrategies, strings.TrimPrefix(m, "template:")) {
				return nil, fmt.Errorf("method %s: %s has no such CREATE DATABASE … TEMPLATE strategy", m, engineName)
			}
		default:
			if _, err := backend.Get(m); err != nil {
				return nil, err
			}
		}
		byName[m] = mr
	}
	return byName, nil
}

func cloneSample(ctx context.Context, p *project.Project, b *project.Built, ds *Dataset, method string, o CloneOptions) (*Sample, error) {
	in, err := p.Clone(ctx, b, instance.Options{Backend: method})
	if err != nil {
		return nil, err
	}
	defer in.Destroy(context.Background(), p.Store)
	st := in.State
	smp := &Sample{CloneMs: st.CloneMs, ReadyMs: st.ReadyMs}
	if o.Prewarm {
		pw, err := instance.Prewarm(ctx, st, nil, nil)
		if err != nil {
			return nil, err
		}
		smp.PrewarmMs = pw.Ms
	}
	if smp.WritesMs, err = writes(ctx, ds, st.Conn.Env, ""); err != nil {
		return nil, err
	}
	// What the clone owns after the writes: an overlay's upper dir, else
	// the clone itself minus the extents it still shares with the golden.
	dir := instance.OwnedDir(st)
	if smp.PrivateBytes, err = fsutil.PrivateBytes(dir); err != nil {
		return nil, err
	}
	if o.Workload > 0 {
		if smp.Workload, err = runWorkload(ctx, ds, st.Conn.URL, st.Conn.Env, o.Workload, o.WorkloadClients); err != nil {
			return nil, err
		}
		if smp.Workload.PrivateBytes, err = fsutil.PrivateBytes(dir); err != nil {
			return nil, err
		}
	}
	return smp, nil
}

// templateSample measures CREATE DATABASE … TEMPLATE on a running server:
// "clone" is the statement, "ready" adds the first query on the new db.
func templateSample(ctx context.Context, host *instance.Instance, ds *Dataset, strategy string, run int, o CloneOptions) (*Sample, error) {
	kit, err := kitOf(ds.Engine)
	if err != nil {
		return nil, err
	}
	conn := host.State.Conn
	// The template may have no other sessions: talk from another database.
	admin, err := openOne(ctx, kit, withDatabase(conn.URL, ds.Database, kit.AdminDatabase), conn.Env)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	name := fmt.Sprintf("bench_%s_%d", strategy, run)
	t0 := time.Now()
	if _, err := admin.ExecContext(ctx, kit.CreateFromTemplate(name, ds.Database, strategy)); err != nil {
		return nil, err
	}
	defer admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name)
	smp := &Sample{CloneMs: ms(time.Since(t0))}
	nc, err := openOne(ctx, kit, withDatabase(conn.URL, ds.Database, name), conn.Env)
	if err != nil {
		return nil, err
	}
	nc.Close()
	smp.ReadyMs = ms(time.Since(t0))
	if smp.WritesMs, err = writes(ctx, ds, conn.Env, name); err != nil {
		return nil, err
	}
	var size int64
	if err := admin.QueryRowContext(ctx, kit.DatabaseSize, name).Scan(&size); err != nil {
		return nil, err
	}
	smp.PrivateBytes = size
	if o.Workload > 0 {
		if smp.Workload, err = runWorkload(ctx, ds, withDatabase(conn.URL, ds.Database, name), conn.Env, o.Workload, o.WorkloadClients); err != nil {
			return nil, err
		}
	}
	return smp, nil
}

// withDatabase is url with its database from one to another.
func withDatabase(url, from, to string) string {
	return strings.Replace(url, "/"+from+"?", "/"+to+"?", 1)
}

// openOne opens a one-connection handle on url and proves it with a
// query.
func openOne(ctx context.Context, kit engine.BenchKit, url string, env map[string]string) (*sql.DB, error) {
	db, err := kit.OpenDB(url, env)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	var one int
	if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// writes times Writes single-row inserts into the dataset's largest
// table, one client command each, as a test script would.
func writes(ctx context.Context, ds *Dataset, env map[string]string, db string) ([]float64, error) {
	kit, err := kitOf(ds.Engine)
	if err != nil {
		return nil, err
	}
	var out []float64
	for i := 1; i <= Writes; i++ {
		argv, extra := kit.Insert(env, db, ds.Table, ds.Rows, i)
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), extra...)
		t := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("write %d: %v: %s", i, err, strings.TrimSpace(string(b)))
		}
		out = append(out, ms(time.Since(t)))
	}
	return out, nil
}

func (mr *MethodResult) summarize() {
	var clone, ready, first, later, priv, tps, wmax, wpriv []float64
	for _, s := range mr.Samples {
		if s.Workload != nil {
			tps, wmax = append(tps, s.Workload.TPS), append(wmax, s.Workload.MaxMs)
			wpriv = append(wpriv, float64(s.Workload.PrivateBytes)/(1<<20))
		}
		clone, ready = append(clone, s.CloneMs), append(ready, s.ReadyMs)
		if len(s.WritesMs) > 0 {
			first = append(first, s.WritesMs[0])
			later = append(later, Quantile(s.WritesMs[1:], 0.5))
		}
		priv = append(priv, float64(s.PrivateBytes)/(1<<20))
	}
	mr.Clone, mr.Ready, mr.FirstWrite, mr.LaterWrite, mr.PrivateMiB = stat(clone), stat(ready), stat(first), stat(later), stat(priv)
	mr.TPS, mr.WorkMaxMs, mr.WorkPrivMiB = stat(tps), stat(wmax), stat(wpriv)
}

func stat(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[len(s)-1]}
}

// checkSpace refuses a bench the store cannot hold, before minutes go
// into generating data: the golden (unless built) plus one full copy at a
// time for the baselines (a plain copy, or the database a TEMPLATE makes).
// A golden takes about 1.15× the nominal size (indexes, WAL, catalogs).
func checkSpace(ctx context.Context, p *project.Project, eng engine.Engine, r *recipe.Recipe, ds *Dataset, methods []string) error {
	s := p.Store
	est := uint64(float64(ds.Size) * 1.15)
	var need uint64
	if k, err := p.Key(ctx, eng, r); err != nil {
		return err
	} else if _, err := golden.Lookup(s, k.Key); err != nil {
		need += est
	}
	full := len(methods) == 0 // the default methods include the copy baseline
	for _, m := range methods {
		full = full || fullCopy(m) || strings.HasPrefix(m, "template:")
	}
	if full {
		need += est
	}
	free, err := fsutil.FreeBytes(s.Root)
	if err != nil || need+need/10 <= free {
		return nil
	}
	return errs.Invalid("bench %s %s needs about %s free in the store (golden and one full copy for the baselines), %s has %s: free space, use a bigger --store (e.g. `dbfork store init --fs xfs --size N`), or leave out the copy/template methods with --methods",
		ds.Engine, FormatSize(ds.Size), humanGiB(need+need/10), s.Root, humanGiB(free))
}

func humanGiB(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// fullCopy says whether method m is a backend that copies the whole data
// dir (the plain-copy baseline a user would otherwise use).
func fullCopy(m string) bool {
	b, err := backend.Get(m)
	return err == nil && b.Caps().FullCopy
}
