package golden

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Options tune a build.
type Options struct {
	Progress *progress.Reporter
	Log      *slog.Logger
	// Remote serves the recipe's [cache]: pull before building, push
	// after. Nil: no cache.
	Remote Remote
	// Warn gets one line for the user when something went wrong that did
	// not stop the command (a failed pull or push of the cache).
	Warn func(string)
	// StepCacheMin: the state after a load step (not the last) is kept
	// as an intermediate golden when the steps since the last kept state
	// took at least this long (see steps.go). 0: DefaultStepCacheMin;
	// below 0: no step cache (nothing kept, nothing reused).
	StepCacheMin time.Duration
}

// Result says what Build did.
type Result struct {
	Golden *Golden
	Built  bool // false: it was already in the store (maybe built meanwhile by another process)
	Waited bool // another process was building the same key
	Pulled bool // fetched from the recipe's [cache] from
	Pushed bool // sent to the recipe's [cache] to after the build
}

// Files in a build dir besides data/.
const (
	tmpPrefix  = "tmp-"
	keyFile    = "key"
	serverFile = "server.json"
)

// Build returns the golden for r, building it if the store does not hold
// it yet. Builds of one key are serialised by a file lock, so concurrent
// callers build it once and the others reuse it.
func Build(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	hc := OpenHashCache(filepath.Join(s.CacheDir(), "hashes.json"))
	defer hc.Save()
	key, inputs, version, err := Key(ctx, eng, r, hc)
	if err != nil {
		return nil, err
	}
	return BuildKeyed(ctx, s, eng, r, Keyed{Key: key, Inputs: inputs, Version: version}, o)
}

// Keyed is what Key computed for a recipe.
type Keyed struct {
	Key     string
	Inputs  []Input
	Version string
}

// BuildKeyed is Build for a caller that has already computed the key
// (the daemon, which keeps its own hash cache and golden table): the
// inputs are not hashed twice. The golden it returns is marked used by
// the recipe, so gc keeps each recipe's latest goldens.
func BuildKeyed(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, k Keyed, o Options) (*Result, error) {
	res, err := buildKeyed(ctx, s, eng, r, k, o)
	if err == nil {
		MarkUsed(s, res.Golden.Key, r.Path)
	}
	return res, err
}

func buildKeyed(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, k Keyed, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	key, inputs, version := k.Key, k.Inputs, k.Version
	if g, err := Lookup(s, key); err == nil {
		return &Result{Golden: g}, nil
	}
	res := &Result{}
	lock, err := lockfile.Acquire(ctx, s.BuildLock(key), func() {
		res.Waited = true
		o.Progress.Step("waiting for another build of " + short(key))
		o.Log.Info("waiting for another build of the same key", "key", key)
	})
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if g, err := Lookup(s, key); err == nil {
		o.Progress.Done(false)
		res.Golden = g
		return res, nil
	}
	// We hold the lock, so any build dir of this key is a crashed build,
	// and a final dir without a manifest is broken: out of the way.
	if err := setAsideBroken(s, key); err != nil {
		return nil, err
	}
	ReapBuilds(ctx, s, key, o.Log)
	if fetchRemote(ctx, s, key, r.Cache.From, o) {
		if g, err := Lookup(s, key); err == nil {
			o.Progress.Done(false)
			res.Golden, res.Pulled = g, true
			return res, nil
		}
	}
	g, err := build(ctx, s, eng, r, key, version, inputs, o)
	if err == nil && r.Cache.To != "" && o.Remote != nil {
		// The golden is published: a failed push is said, not fatal.
		if perr := sendRemote(ctx, s, g, r.Cache.To, o); perr != nil {
			o.Log.Warn("could not push the golden to the cache", "repo", r.Cache.To, "err", perr)
			if o.Warn != nil {
				o.Warn("built golden " + short(key) + " but could not push it to " + r.Cache.To + ": " + perr.Error())
			}
		} else {
			res.Pushed = true
		}
	}
	o.Progress.Done(err != nil)
	if err != nil {
		return nil, err
	}
	res.Golden, res.Built = g, true
	return res, nil
}

func build(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, key, version string, inputs []Input, o Options) (g *Golden, err error) {
	start := time.Now()
	ld, err := loaderOf(eng)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(s.GoldensDir(), tmpPrefix)
	if err != nil {
		return nil, fmt.Errorf("create build dir: %w", err)
	}
	var srv *engine.Server
	var bu store.User
	defer func() {
		if err == nil {
			return
		}
		if srv != nil && !srv.Exited() {
			_ = engine.StopRecorded(context.Background(), srv, false)
		}
		if rerr := endBuildUser(context.Background(), bu, tmp); rerr != nil {
			o.Log.Warn("could not end the build's processes; `dbfork gc` will", "err", rerr)
		}
		err = keepLog(ctx, s, tmp, key, err)
		if rerr := discardBuild(tmp); rerr != nil {
			o.Log.Warn("could not remove failed build dir; `dbfork gc` will", "dir", tmp, "err", rerr)
		}
	}()
	data, sock, err := prepareBuildDir(s, tmp, key)
	if err != nil {
		return nil, err
	}
	buildLog, err := os.OpenFile(filepath.Join(tmp, "build.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	defer buildLog.Close()

	plan := planSteps(ctx, s, eng, r, version, inputs, o)
	if plan.base != nil {
		if err := startFromStep(ctx, s, r, tmp, plan, o); err != nil {
			return nil, err
		}
	} else {
		o.Progress.Step("initialise " + eng.Name() + " cluster")
		o.Log.Info("init", "engine", eng.Name(), "version", version, "dir", tmp)
		if err := eng.Init(ctx, engine.InitSpec{DataDir: data, Cluster: ClusterOf(r), User: s.User, LogFile: filepath.Join(tmp, "init.log")}); err != nil {
			return nil, err
		}
	}
	faults.At("build:init")
	if bu, err = buildUser(s, tmp); err != nil {
		return nil, fmt.Errorf("give the build a uid of its own: %w", err)
	}
	copied := statFiles(data, plan.base) // what came from an intermediate golden, as it came

	o.Progress.Step("start build server")
	if err := startBuildServer(ctx, bu, eng, r, tmp, &srv); err != nil {
		return nil, err
	}
	if plan.base == nil {
		if err := ld.Setup(ctx, srv, BuildOf(r)); err != nil {
			return nil, err
		}
	}
	if err := runSteps(ctx, s, eng, ld, &srv, bu, r, tmp, version, inputs, plan, buildLog, o); err != nil {
		return nil, err
	}
	// Each step's run inputs were checked after it ran; a later step may
	// have changed an earlier one's (a migration tool rewriting its own
	// input): all of them once more, now that every step has run.
	if err := sameRunInputs(ctx, r, inputs, plan.from, len(r.Steps)); err != nil {
		return nil, err
	}
	faults.At("build:loaded")
	if err := stopBuildServer(ctx, bu, eng, ld, srv, r, tmp, o); err != nil {
		return nil, err
	}
	srv = nil
	slotDirs, err := addSlots(ctx, bu, eng, r, tmp, &srv, o)
	if err != nil {
		return nil, err
	}
	faults.At("build:stopped")

	o.Progress.Step("fsync and checksum")
	_ = os.Remove(sock)
	if d, err := engine.Lookup(eng.Name()); err == nil {
		for _, f := range d.BuildLeftovers {
			_ = os.Remove(filepath.Join(data, f))
		}
	}
	if err := endBuildUser(ctx, bu, tmp); err != nil {
		return nil, err
	}
	known := unchangedSums(data, copied) // before shareTree changes every file's ctime
	// As root the tree goes to the server user and its group; in every
	// case set-id bits go and what a golden cannot hold is refused.
	shared := s.User.Dropped()
	if err := shareTree(data, nil, s.User); err != nil {
		return nil, err
	}
	files, total, err := listFilesKnown(data, known)
	if err != nil {
		return nil, fmt.Errorf("checksum golden: %w", err)
	}
	if n := shareIdentical(data, files, r); n > 0 {
		o.Log.Info("slots share their files' extents", "bytes", n)
	}
	files = slotFilesLast(files, slotDirs)
	m := newManifest(eng, r, key, version, inputs)
	m.BuildSeconds, m.TotalBytes = time.Since(start).Seconds(), total
	m.SetFiles(files)
	m.GroupShared, m.SlotDirs = shared, slotDirs
	m.StepKeys, m.ReusedSteps = plan.keys, plan.from
	g, err = Publish(s, tmp, m, "build")
	if err != nil {
		return nil, err
	}
	o.Log.Info("golden published", "key", key, "bytes", total, "seconds", m.BuildSeconds)
	return g, nil
}

// newManifest describes a golden of r built by eng (files and sizes are
// filled in once it is stopped).
func newManifest(eng engine.Engine, r *recipe.Recipe, key, version string, inputs []Input) *Manifest {
	m := &Manifest{
		Format: formatVersion, Key: key, Engine: eng.Name(), EngineVersion: version,
		InitOptions: eng.InitOptions(ClusterOf(r)), Recipe: r.Path, Database: r.Database, Owner: r.Owner,
		Inputs: inputs, Created: time.Now().UTC(), Slots: SlotNames(r.Fresh.Slots),
	}
	for _, st := range r.Steps {
		if st.Kind == recipe.StepRun {
			m.Commands = append(m.Commands, st.Command)
		}
	}
	return m
}

// prepareBuildDir lays out a new build dir: its key, an empty data dir and
// a socket dir for the server user.
func prepareBuildDir(s *store.Store, tmp, key string) (data, sock string, err error) {
	if err := openBuildDir(s, tmp); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, keyFile), []byte(key+"\n"), 0o644); err != nil {
		return "", "", err
	}
	data, sock = filepath.Join(tmp, "data"), filepath.Join(tmp, "sock")
	if err := backend.NewDataDir(data); err != nil {
		return "", "", fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Mkdir(sock, 0o700); err != nil {
		return "", "", err
	}
	for _, d := range []string{data, sock} {
		if err := s.User.Chown(d); err != nil {
			return "", "", err
		}
	}
	return data, sock, nil
}

// startBuildServer starts the build server on tmp's data dir. *srv is set (and recorded in tmp) as soon as the
// process exists, before it is ready: a crash while it starts must not
// leave a server gc cannot find.
func startBuildServer(ctx context.Context, u store.User, eng engine.Engine, r *recipe.Recipe, tmp string, srv **engine.Server) error {
	spec := buildSpec(u, eng, r, tmp, srv)
	// Commands (migration tools) reach the build server exactly as tests
	// reach clones: over 127.0.0.1 with a password, which Finish drops.
	spec.Listen, spec.Password = true, textutil.Password()
	started, err := eng.Start(ctx, spec)
	if err == nil {
		*srv = started
		err = writeJSON(filepath.Join(tmp, serverFile), started)
	}
	if err != nil {
		return err
	}
	faults.At("build:started")
	return nil
}

// buildSpec is how a server starts on the build dir tmp: the safe
// profile, as the build's own uid u; once launched it is recorded in
// tmp (so gc finds it if dbfork dies) and in *srv.
func buildSpec(u store.User, eng engine.Engine, r *recipe.Recipe, tmp string, srv **engine.Server) engine.StartSpec {
	return engine.StartSpec{
		DataDir: filepath.Join(tmp, "data"), SocketDir: filepath.Join(tmp, "sock"), LogFile: filepath.Join(tmp, "server.log"), RunDir: tmp,
		Profile: engine.ProfileSafe, User: u, Settings: buildSettings(eng),
		Database: r.Database, Owner: r.Owner,
		OnLaunch: func(launched *engine.Server) error {
			*srv = launched
			if err := writeJSON(filepath.Join(tmp, serverFile), launched); err != nil {
				return err
			}
			faults.At("build:launched")
			return nil
		},
	}
}

// loadSteps runs the recipe's load steps from..to-1 (0-based) from
// private copies of their inputs (see snapshotInputs), then checks that
// the inputs of `run` steps, which their commands read themselves, still
// hold what the key was computed from.
func loadSteps(ctx context.Context, ld engine.Loader, srv *engine.Server, r *recipe.Recipe, inputs []Input, tmp string, from, to int, buildLog *os.File, o Options) error {
	copies := filepath.Join(tmp, inputsDir)
	steps, err := snapshotInputs(ctx, r, inputs, copies, from, to)
	if err != nil {
		return err
	}
	for j, st := range steps {
		i := from + j
		o.Progress.Step(fmt.Sprintf("[%d/%d] %s", i+1, len(r.Steps), st.Name))
		o.Log.Info("load step", "n", i+1, "kind", st.Kind, "name", st.Name)
		fmt.Fprintf(buildLog, "== step %d: %s\n", i+1, st.Name)
		if err := ld.Load(ctx, srv, BuildOf(r), st, buildLog); err != nil {
			return fmt.Errorf("load step %d (%s): %w", i+1, st.Name, err)
		}
	}
	if err := fsutil.RemoveAll(copies); err != nil {
		return err
	}
	return sameRunInputs(ctx, r, inputs, from, to)
}

// stopBuildServer finishes the golden in the server (freeze, analyze,
// checkpoint), stops it cleanly, checks it shut down clean and seals the
// data dir (at the end of a build and for a kept step's state; the
// recipe's slots come after it: addSlots).
func stopBuildServer(ctx context.Context, u store.User, eng engine.Engine, ld engine.Loader, srv *engine.Server, r *recipe.Recipe, tmp string, o Options) error {
	o.Progress.Step("freeze, analyze and checkpoint")
	if err := ld.Finish(ctx, srv, BuildOf(r)); err != nil {
		return err
	}
	return stopAndSeal(ctx, u, eng, srv, r, tmp, o)
}

// stopAndSeal stops the build server cleanly, checks it shut down clean,
// ends every process of the build's uid and seals the data dir.
func stopAndSeal(ctx context.Context, u store.User, eng engine.Engine, srv *engine.Server, r *recipe.Recipe, tmp string, o Options) error {
	if err := stopClean(ctx, u, eng, srv, tmp, o); err != nil {
		return err
	}
	return seal(ctx, u, eng, r, tmp, o)
}

// stopClean stops the build server cleanly, checks it shut down clean and
// ends every process of the build's uid.
func stopClean(ctx context.Context, u store.User, eng engine.Engine, srv *engine.Server, tmp string, o Options) error {
	o.Progress.Step("clean shutdown")
	if err := eng.Stop(ctx, srv, true); err != nil {
		return err
	}
	if cc, ok := eng.(engine.CleanChecker); ok {
		if err := cc.CheckCleanShutdown(ctx, filepath.Join(tmp, "data"), filepath.Join(tmp, "server.log")); err != nil {
			return err
		}
	}
	// Nothing the recipe's SQL started may run on while root reworks the
	// files (Seal) or hands them over.
	return store.KillUserProcesses(ctx, u.UID, tmp)
}

// seal lets the engine seal the stopped build's data dir and drops the
// server's record.
func seal(ctx context.Context, u store.User, eng engine.Engine, r *recipe.Recipe, tmp string, o Options) error {
	if sl, ok := eng.(engine.Sealer); ok {
		o.Progress.Step("seal")
		var sealing *engine.Server
		if err := sl.Seal(ctx, buildSpec(u, eng, r, tmp, &sealing)); err != nil {
			return err
		}
	}
	return os.Remove(filepath.Join(tmp, serverFile))
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, data, 0o600)
}

// discardBuild removes a build dir whose server is already stopped.
func discardBuild(tmp string) error {
	if err := backend.RemoveDataDir(filepath.Join(tmp, "data")); err != nil {
		return err
	}
	return fsutil.RemoveAll(tmp)
}

// sameRunInputs reads the inputs of `run` steps from..to-1 again, after
// the build ran them, with the rights of whoever asked, and fails when one
// no longer has the content its key was computed from: a file changed
// while the build ran would publish a golden under a key that promises
// other data (to every user of the store). The inputs dbfork loads itself
// need no such check: the build loaded the very bytes it hashed.
func sameRunInputs(ctx context.Context, r *recipe.Recipe, inputs []Input, from, to int) error {
	n := 0
	for i, st := range r.Steps {
		for _, f := range st.Files {
			if n >= len(inputs) {
				return fmt.Errorf("recipe inputs changed while building: nothing published; run again")
			}
			if i < from || i >= to {
				n++
				continue
			}
			if st.Kind == recipe.StepRun {
				sum, _, err := (*HashCache)(nil).SumAs(ctx, f)
				if err != nil || sum != inputs[n].SHA256 {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					return fmt.Errorf("%s changed while the build read it: nothing published; run again", r.Rel(f))
				}
			}
			n++
		}
	}
	return nil
}
