package golden

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/recipe"
)

// The engine packages know nothing of recipe files: these turn a recipe
// into the plain values they take.

// EngineWant names the server r needs, for the engines registry.
func EngineWant(r *recipe.Recipe) engine.Want {
	return engine.Want{Engine: r.Engine, Version: r.Version, Bindir: r.Bindir, NoFetch: r.NoFetch, Settings: r.Settings, Recipe: filepath.Base(r.Path)}
}

// ClusterOf is what a golden's data dir is created for.
func ClusterOf(r *recipe.Recipe) engine.Cluster {
	return engine.Cluster{Database: r.Database, Owner: r.Owner, Locale: r.Locale, Encoding: r.Encoding}
}

// BuildOf is what a build server loads r into.
func BuildOf(r *recipe.Recipe) engine.Build {
	return engine.Build{Cluster: ClusterOf(r), Path: r.Path, Dir: r.Dir, Freeze: r.Freeze, Env: r.Env}
}

// StepOf is one of r's load steps as an engine runs it.
func StepOf(st recipe.Step) engine.Step {
	return engine.Step{Kind: st.Kind, Name: st.Name, Files: st.Files, Command: st.Command}
}

// loaderOf is eng's loading half; an engine without one cannot build.
func loaderOf(eng engine.Engine) (engine.Loader, error) {
	if ld, ok := eng.(engine.Loader); ok {
		return ld, nil
	}
	return nil, errs.Unsupported("engine %s cannot build goldens (it loads no recipe steps); pull the golden instead", eng.Name())
}

// LoadRecipe reads and parses the recipe at path, expanding its globs and
// directories, with the rights of the user ctx acts for (a daemon's peer,
// the user behind sudo; see caller.AsFS), once: the names it
// resolves are the ones the build hashes and copies. A recipe that user
// cannot read is not read for them, and names in dirs they cannot search
// are not looked up for them (no existence oracle).
func LoadRecipe(ctx context.Context, path string) (*recipe.Recipe, error) {
	// Relative to this process's working dir, which the caller may not
	// be able to name (a dir they cannot search).
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errs.Invalid("recipe %s: %w", path, err)
	}
	var got *recipe.Recipe
	err = caller.AsFS(ctx, func() error {
		r, err := recipe.LoadAt(abs, path)
		got = r
		return err
	})
	if err != nil {
		if caller.From(ctx) != nil && errors.Is(err, fs.ErrPermission) {
			return nil, errs.NotFound("recipe %s cannot be read by uid %d: permission denied (builds read recipes with the rights of the user who asked, the one behind sudo too)", path, caller.UID(ctx))
		}
		return nil, err
	}
	return got, nil
}
