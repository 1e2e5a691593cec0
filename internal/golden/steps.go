package golden

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// The build cache per load step. A recipe's big seed rarely changes, its
// migrations change daily; without this every migration change reloads
// the seed. So after a step whose work took at least StepCacheMin (and
// that is not the last: the last step's state is the golden), the build
// server is stopped cleanly, its data dir is copied copy-on-write
// (backend.CopyDataDir) into an intermediate golden published under the
// step's key (stepkey.go), and the server starts again on the build dir.
// A later build looks for the intermediate of the last step whose key is
// unchanged, starts from a copy of it and runs only the steps after it.
// The final golden's key does not change: it names the same data
// whichever way it was built.

// DefaultStepCacheMin is how long the steps since the last kept state
// must have taken for the state after them to be kept. Keeping one costs
// a finish and seal, a copy and a checksum of the data dir (seconds for a
// big one, more than a few small steps take to run again), and each kept
// state is a golden more in the store: small seeds, tests' fixtures among
// them, are not worth one.
const DefaultStepCacheMin = 5 * time.Second

// stepPlan is how one build runs its steps.
type stepPlan struct {
	keys []string      // the key of each step
	from int           // steps [0, from) come from base
	base *Golden       // the intermediate golden of step from; nil when from is 0
	min  time.Duration // see Options.StepCacheMin; < 0: off
}

// planSteps computes the step keys of r and finds the longest prefix of
// steps an intermediate golden in the store already holds.
func planSteps(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, version string, inputs []Input, o Options) stepPlan {
	p := stepPlan{min: o.StepCacheMin}
	if p.min == 0 {
		p.min = DefaultStepCacheMin
	}
	p.keys = stepKeys(stepBase(eng.Name(), version, eng.InitOptions(ClusterOf(r))), r, inputs)
	if p.min < 0 {
		return p
	}
	for i := len(p.keys) - 2; i >= 0; i-- {
		g, err := Lookup(s, p.keys[i])
		if err != nil {
			// The recipe's [cache] may hold it: a teammate's or CI's
			// build pushed the states it kept.
			if g = fetchStep(ctx, s, p.keys[i], r.Cache.From, o); g == nil {
				continue
			}
		}
		if g.Manifest.Intermediate == nil || g.Manifest.Intermediate.Step != i+1 {
			continue
		}
		if probs, err := Verify(g, false); err != nil || len(probs) > 0 {
			o.Log.Warn("intermediate golden does not match its manifest; not used", "key", g.Key, "problems", len(probs), "err", err)
			continue
		}
		p.from, p.base = i+1, g
		break
	}
	return p
}

// startFromStep replaces the empty data dir of the build dir tmp by a
// copy of the plan's intermediate golden.
func startFromStep(ctx context.Context, s *store.Store, r *recipe.Recipe, tmp string, p stepPlan, o Options) error {
	o.Progress.Step(fmt.Sprintf("reuse steps 1-%d from intermediate golden %s", p.from, short(p.base.Key)))
	// Its key's lock, held while it is copied, keeps gc from removing it
	// meanwhile (gc's removal takes the lock, or keeps the golden).
	lock, err := lockfile.Acquire(ctx, s.BuildLock(p.base.Key), nil)
	if err != nil {
		return err
	}
	defer lock.Release()
	if _, err := Lookup(s, p.base.Key); err != nil {
		return fmt.Errorf("intermediate golden %s went away; run the build again: %w", short(p.base.Key), err)
	}
	MarkUsed(s, p.base.Key, r.Path)
	data := filepath.Join(tmp, "data")
	if err := backend.RemoveDataDir(data); err != nil {
		return err
	}
	how, err := backend.CopyDataDir(p.base.DataDir(), data)
	if err != nil {
		return fmt.Errorf("copy intermediate golden %s: %w", short(p.base.Key), err)
	}
	o.Log.Info("reused steps", "from", 1, "to", p.from, "intermediate", p.base.Key, "copy", how)
	faults.At("build:cloned")
	return nil
}

// runSteps runs the steps the plan does not reuse on the build server
// *srv. Every step but the first runs on a freshly started server: the
// server is stopped cleanly after each step but the last, and its data
// dir is kept as an intermediate golden when the steps since the last
// kept state took long enough. The restart happens whether or not the
// state is kept, so a golden's content never depends on how long a step
// took or on what the cache held: a server's counters that a restart
// moves (MariaDB's AUTO_INCREMENT reservations, the cached values of a
// sequence) move the same way in a full and an incremental build.
func runSteps(ctx context.Context, s *store.Store, eng engine.Engine, ld engine.Loader, srv **engine.Server, bu store.User,
	r *recipe.Recipe, tmp, version string, inputs []Input, p stepPlan, buildLog *os.File, o Options) error {
	var work time.Duration // load time since the last kept state
	for i := p.from; i < len(r.Steps); i++ {
		t0 := time.Now()
		if err := loadSteps(ctx, ld, *srv, r, inputs, tmp, i, i+1, buildLog, o); err != nil {
			return err
		}
		work += time.Since(t0)
		if i == len(r.Steps)-1 {
			break
		}
		keep := p.min >= 0 && work >= p.min
		if err := stepBoundary(ctx, s, eng, ld, srv, bu, r, tmp, version, inputs, p, i, keep, o); err != nil {
			return err
		}
		if keep {
			work = 0
		}
	}
	return nil
}

// stepBoundary stops the build server cleanly after step i (0-based),
// publishes its data dir as the intermediate golden of the step when keep
// is set, and starts the server again. Only a failure to stop or start
// fails the build: a state that could not be kept is said and the build
// goes on.
func stepBoundary(ctx context.Context, s *store.Store, eng engine.Engine, ld engine.Loader, srv **engine.Server, bu store.User,
	r *recipe.Recipe, tmp, version string, inputs []Input, p stepPlan, i int, keep bool, o Options) error {
	if keep {
		// A kept state is finished and sealed as a golden would be if
		// the recipe ended here (freeze, analyze, checkpoint, seal:
		// PostgreSQL stamps pages, MariaDB reworks its redo log): a
		// build that starts from it then freezes and stamps only what
		// its own steps wrote, its seed's files stay shared with the
		// intermediate and keep their sums. Otherwise the final freeze
		// and seal would rewrite every page of the seed (1.3 GB for
		// pgbench -s 100) and the golden would be read again in full.
		if err := stopBuildServer(ctx, bu, eng, ld, *srv, r, tmp, o); err != nil {
			return err
		}
	} else {
		o.Progress.Step(fmt.Sprintf("stop build server after step %d", i+1))
		if err := eng.Stop(ctx, *srv, true); err != nil {
			return err
		}
		if cc, ok := eng.(engine.CleanChecker); ok {
			if err := cc.CheckCleanShutdown(ctx, filepath.Join(tmp, "data"), filepath.Join(tmp, "server.log")); err != nil {
				return err
			}
		}
		if err := store.KillUserProcesses(ctx, bu.UID, tmp); err != nil {
			return err
		}
	}
	*srv = nil
	if err := os.Remove(filepath.Join(tmp, serverFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	faults.At("step:stopped")
	if keep {
		o.Progress.Step(fmt.Sprintf("keep the state after step %d", i+1))
		if err := publishStep(ctx, s, eng, r, tmp, version, inputs, p, i, o); err != nil {
			if ctx.Err() != nil {
				return err
			}
			o.Log.Warn("could not keep the state after a step; the build goes on", "step", i+1, "err", err)
			if o.Warn != nil {
				o.Warn(fmt.Sprintf("could not keep the state after step %d (the next build runs it again): %v", i+1, err))
			}
		}
	}
	o.Progress.Step("restart build server")
	if err := startBuildServer(ctx, bu, eng, r, tmp, srv); err != nil {
		return err
	}
	faults.At("step:restarted")
	return nil
}

// publishStep copies the stopped build's data dir into a work dir of its
// own and publishes it as an intermediate golden, atomically as a golden
// is: under the step key's lock, manifest last, one rename.
func publishStep(ctx context.Context, s *store.Store, eng engine.Engine, r *recipe.Recipe, tmp, version string, inputs []Input, p stepPlan, i int, o Options) (err error) {
	key := p.keys[i]
	g, release, err := Claim(ctx, s, key, nil, o.Log)
	if err != nil {
		return err
	}
	if g != nil {
		MarkUsed(s, key, r.Path) // another build kept it meanwhile
		return nil
	}
	defer release()
	itmp, err := os.MkdirTemp(s.GoldensDir(), tmpPrefix)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if rerr := discardBuild(itmp); rerr != nil {
				o.Log.Warn("could not remove the work dir of an intermediate golden; `dbfork gc` will", "dir", itmp, "err", rerr)
			}
		}
	}()
	if err := os.WriteFile(filepath.Join(itmp, keyFile), []byte(key+"\n"), 0o644); err != nil {
		return err
	}
	start := time.Now()
	if _, err := backend.CopyDataDir(filepath.Join(tmp, "data"), filepath.Join(itmp, "data")); err != nil {
		return fmt.Errorf("copy the build's data dir: %w", err)
	}
	faults.At("step:copied")
	files, total, err := listFiles(filepath.Join(itmp, "data"))
	if err != nil {
		return fmt.Errorf("checksum intermediate golden: %w", err)
	}
	m := stepManifest(eng, r, version, inputs, p, i)
	m.BuildSeconds, m.TotalBytes = time.Since(start).Seconds(), total
	m.SetFiles(files)
	ig, err := Publish(s, itmp, m, "step")
	if err != nil {
		return err
	}
	MarkUsed(s, key, r.Path)
	o.Log.Info("intermediate golden published", "step", i+1, "key", key, "bytes", total)
	if r.Cache.To != "" && o.Remote != nil {
		// Shared like the golden, so the next machine's build of a
		// changed migration starts here too; failing to is only said.
		if perr := o.Remote.Send(ctx, s, ig, r.Cache.To); perr != nil {
			o.Log.Warn("could not push the intermediate golden to the cache", "step", i+1, "repo", r.Cache.To, "err", perr)
		}
	}
	return nil
}

// fetchStep pulls the intermediate golden key from the recipe's cache
// repo, under the key's build lock (the registry's artifact must carry
// that key, or it is refused); nil when there is no repo, it lacks one,
// or the pull fails (said in the log: the build goes on without it).
func fetchStep(ctx context.Context, s *store.Store, key, repo string, o Options) *Golden {
	if o.Remote == nil || repo == "" {
		return nil
	}
	lock, err := lockfile.Acquire(ctx, s.BuildLock(key), nil)
	if err != nil {
		return nil
	}
	defer lock.Release()
	if g, err := Lookup(s, key); err == nil {
		return g
	}
	ok, err := o.Remote.Fetch(ctx, s, key, repo)
	if err != nil {
		o.Log.Warn("could not pull an intermediate golden from the cache", "repo", repo, "key", key, "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	g, err := Lookup(s, key)
	if err != nil {
		return nil
	}
	o.Log.Info("pulled intermediate golden", "repo", repo, "key", key)
	return g
}

// stepManifest describes the intermediate golden of step i (0-based):
// the inputs and commands of steps 1..i+1 only.
func stepManifest(eng engine.Engine, r *recipe.Recipe, version string, inputs []Input, p stepPlan, i int) *Manifest {
	var mine []Input
	for _, in := range inputs {
		if in.Step <= i+1 {
			mine = append(mine, in)
		}
	}
	m := newManifest(eng, r, p.keys[i], version, mine)
	m.Commands = nil
	for _, st := range r.Steps[:i+1] {
		if st.Kind == recipe.StepRun {
			m.Commands = append(m.Commands, st.Command)
		}
	}
	m.Intermediate = &StepState{Step: i + 1, Steps: len(r.Steps)}
	m.StepKeys = append([]string(nil), p.keys[:i+1]...)
	return m
}

// copiedFile is a regular file of a build dir as it was right after the
// build started from an intermediate golden, with the sum the
// intermediate's manifest gives its content.
type copiedFile struct {
	ino, size    uint64
	mtime, ctime unix.Timespec
	sum          string
}

// statFiles records every regular file of data that base's manifest has
// a sum for (nil when the build did not start from an intermediate).
func statFiles(data string, base *Golden) map[string]copiedFile {
	if base == nil {
		return nil
	}
	files, err := base.Manifest.Files()
	if err != nil {
		return nil // nothing known: every file is read
	}
	out := map[string]copiedFile{}
	var newest time.Time
	for _, f := range files {
		if f.SHA256 == "" {
			continue
		}
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(data, f.Path), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Size) != uint64(f.Size) {
			continue
		}
		out[f.Path] = copiedFile{st.Ino, uint64(st.Size), st.Mtim, st.Ctim, f.SHA256}
		if t := time.Unix(st.Ctim.Unix()); t.After(newest) {
			newest = t
		}
	}
	// Timestamps come from a clock that ticks every few ms: a write in
	// the tick of the last chown would leave ctime as it was. Nothing
	// writes before this returns, so it returns once that tick is over.
	if wait := time.Until(newest.Add(timestampTick)); wait > 0 {
		time.Sleep(wait)
	}
	return out
}

// timestampTick bounds the kernel's coarse clock tick (10 ms at HZ=100).
const timestampTick = 20 * time.Millisecond

// unchangedSums returns the sums of the files statFiles recorded that
// nothing has changed since: same inode, size, mtime and ctime. The
// kernel sets ctime on every write, truncate, rename onto or chown and
// nobody can set it back, so such a file still holds the intermediate's
// content and need not be read again (a 1.5 GB seed would take seconds to
// hash; the migration after it touches a few files).
func unchangedSums(data string, copied map[string]copiedFile) map[string]string {
	if copied == nil {
		return nil
	}
	out := map[string]string{}
	for p, c := range copied {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(data, p), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if st.Ino == c.ino && uint64(st.Size) == c.size && st.Mtim == c.mtime && st.Ctim == c.ctime {
			out[p] = c.sum
		}
	}
	return out
}
