package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/pool"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/recipe"
)

// loadRecipe reads the recipe a request names, and expands its globs,
// with the rights of whoever asked (ctx's caller): the daemon is root, the
// caller may not be. Their inputs are then hashed and copied with the
// same rights (golden.Key, golden.BuildKeyed). Paths must be absolute:
// the daemon's working directory means nothing to the caller.
func loadRecipe(ctx context.Context, path string) (*recipe.Recipe, error) {
	if path == "" {
		return nil, errs.Invalid("request needs \"recipe\": the absolute path of a dbfork.toml")
	}
	if !filepath.IsAbs(path) {
		return nil, errs.Invalid("recipe path %q is relative: send an absolute path", path)
	}
	return project.LoadRecipe(ctx, path)
}

// engineFor returns the (cached) engine for a recipe.
func (d *Daemon) engineFor(ctx context.Context, r *recipe.Recipe) (engine.Engine, error) {
	return d.app.Engine(ctx, r)
}

// golden builds or finds the recipe's golden (project.Golden: the key is
// recomputed on every call, so an edited seed file is picked up by the
// next acquire), loading the recipe with the caller's rights.
func (d *Daemon) golden(ctx context.Context, path string, peer api.Peer) (*recipe.Recipe, engine.Engine, *golden.Result, error) {
	ctx = d.asCaller(ctx, peer)
	r, err := loadRecipe(ctx, path)
	if err != nil {
		return nil, nil, nil, err
	}
	b, err := d.app.Golden(ctx, r)
	if err != nil {
		return nil, nil, nil, err
	}
	return r, b.Engine, b.Result, nil
}

// asCaller makes a build's `run` steps run as whoever asked: the peer of
// a unix-socket request, else (TCP, `serve -f`) the user behind `sudo`
// (Options.Sudo).
func (d *Daemon) asCaller(ctx context.Context, p api.Peer) context.Context {
	if p.Unix && p.UID >= 0 && p.GID >= 0 {
		return caller.With(ctx, func() *caller.Caller { return caller.Lookup(p.UID, p.GID) })
	}
	return caller.With(ctx, func() *caller.Caller { return d.o.Sudo })
}

// EnsureGolden implements api.Service.
func (d *Daemon) EnsureGolden(ctx context.Context, req api.GoldenRequest, peer api.Peer) (*api.Golden, error) {
	t0 := time.Now()
	_, _, res, err := d.golden(withStepEnv(ctx, req.Env, peer), req.Recipe, peer)
	if err != nil {
		return nil, err
	}
	m := res.Golden.Manifest
	return &api.Golden{Key: res.Golden.Key, Engine: m.Engine, Version: m.EngineVersion, Built: res.Built,
		Waited: res.Waited, Ms: msSince(t0)}, nil
}

// Warm makes the pool for a recipe exist (building its golden), so its
// instances are warming before the first client asks (`serve -f`).
func (d *Daemon) Warm(ctx context.Context, recipePath, backendName string) (string, error) {
	r, eng, res, err := d.golden(ctx, recipePath, api.Peer{}) // serve -f: as the user behind sudo
	if err != nil {
		return "", err
	}
	if backendName == "" {
		backendName = "auto"
	}
	e, err := d.entryFor(r, eng, res.Golden, backendName, pool.Config{Min: r.Pool.Min, Max: r.Pool.Max, Backoff: d.o.Backoff}, !r.Pool.MaxSet)
	if err != nil {
		return "", err
	}
	return e.id, nil
}

// withStepEnv makes the run steps of a build this request causes run in
// the environment the client sent (its virtualenv, node_modules, PATH),
// never in the daemon's.
func withStepEnv(ctx context.Context, env map[string]string, p api.Peer) context.Context {
	from := "the client that asked"
	if p.Unix {
		from = fmt.Sprintf("the client that asked (uid %d, pid %d)", p.UID, p.PID)
	}
	return engine.WithStepEnv(ctx, env, from)
}
