// Package project is dbfork's application layer: it turns a store, an
// engine opener and a recipe into a golden and a clone of it, the chain
// every front end needs (the CLI's build, up, reset and bench, the
// daemon, the Go test helper), so none of them assembles it again:
//
//	p := project.New(project.Options{Store: s})
//	b, err := p.Golden(ctx, r)             // built once, cached by key
//	in, err := p.Clone(ctx, b, instance.Options{Backend: "auto"})
//
// Front ends keep what is theirs: flags, environment, loading the recipe
// with the right user's rights, and printing.
package project

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// Opener finds the server an engine.Want names.
type Opener func(context.Context, engine.Want) (engine.Engine, error)

// Options say what a Project works with.
type Options struct {
	Store *store.Store
	// Open finds a recipe's server. Nil: an installed one, else the
	// engine cache Engines describes.
	Open Opener
	// Engines is the engine cache behind the default opener (ignored
	// when Open is set).
	Engines EngineCache
	// Build tunes the builds Golden runs: progress, log, the recipe's
	// [cache] remote, warnings, the step cache.
	Build golden.Options
	// Heavy, if set, is called before Golden builds or pulls (minutes of
	// CPU: loading, stamping, checksums, unpacking) and the function it
	// returns once that ends.
	Heavy func() (done func())
}

// Project is one store's way from recipes to goldens and clones. It
// keeps the input hashes, the engines opened and the goldens seen in
// memory, so a long-lived caller (the daemon) pays for each once; it is
// safe for concurrent use.
type Project struct {
	Store *store.Store
	// Build tunes the builds Golden runs (Options.Build); change it only
	// before the first call.
	Build golden.Options
	open  Opener
	hc    *golden.HashCache
	heavy func() func()

	mu      sync.Mutex
	engines map[string]engine.Engine  // by engine, bindir and version
	goldens map[string]*golden.Golden // published goldens by key
}

// New returns the project o describes.
func New(o Options) *Project {
	open := o.Open
	if open == nil {
		open = NewOpener(FetchOptions(o.Store, o.Engines))
	}
	return &Project{Store: o.Store, open: open, Build: o.Build, heavy: o.Heavy,
		hc:      golden.OpenHashCache(HashCachePath(o.Store)),
		engines: map[string]engine.Engine{}, goldens: map[string]*golden.Golden{}}
}

// HashCachePath is where a store keeps the hashes of recipe inputs (by
// path, size and mtime), so an unchanged input is not read again.
func HashCachePath(s *store.Store) string {
	return filepath.Join(s.CacheDir(), "hashes.json")
}

// Built is a recipe's golden and what it was made with.
type Built struct {
	Recipe *recipe.Recipe
	Engine engine.Engine
	*golden.Result
}

// Engine returns the server r asks for (opened once per project).
func (p *Project) Engine(ctx context.Context, r *recipe.Recipe) (engine.Engine, error) {
	k := r.Engine + "\x00" + r.Bindir + "\x00" + r.Version
	p.mu.Lock()
	eng, ok := p.engines[k]
	p.mu.Unlock()
	if ok {
		return eng, nil
	}
	eng, err := p.open(ctx, golden.EngineWant(r))
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.engines[k] = eng
	p.mu.Unlock()
	return eng, nil
}

// Key computes r's golden key with eng, through the store's hash cache.
func (p *Project) Key(ctx context.Context, eng engine.Engine, r *recipe.Recipe) (golden.Keyed, error) {
	key, inputs, version, err := golden.Key(ctx, eng, r, p.hc)
	return golden.Keyed{Key: key, Inputs: inputs, Version: version}, err
}

// Golden builds r's golden, or finds it. The key is recomputed on every
// call (a stat per input, through the hash cache), so an edited input is
// picked up by the next call; a golden already seen is not read again.
func (p *Project) Golden(ctx context.Context, r *recipe.Recipe) (*Built, error) {
	defer p.hc.Save() // what was hashed stays hashed, whatever the outcome
	eng, err := p.Engine(ctx, r)
	if err != nil {
		return nil, err
	}
	k, err := p.Key(ctx, eng, r)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	g, ok := p.goldens[k.Key]
	p.mu.Unlock()
	if ok {
		if _, err := os.Stat(filepath.Join(g.Dir, golden.ManifestName)); err == nil {
			return &Built{Recipe: r, Engine: eng, Result: &golden.Result{Golden: g}}, nil
		}
	}
	if p.heavy != nil {
		defer p.heavy()()
	}
	res, err := golden.BuildKeyed(ctx, p.Store, eng, r, k, p.Build)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.goldens[res.Golden.Key] = res.Golden
	p.mu.Unlock()
	return &Built{Recipe: r, Engine: eng, Result: res}, nil
}

// Clone starts an instance on a clone of b's golden. The recipe's server
// settings and path (for `dbfork reset`) are used unless o gives its own.
func (p *Project) Clone(ctx context.Context, b *Built, o instance.Options) (*instance.Instance, error) {
	if o.Settings == nil {
		o.Settings = b.Recipe.Settings
	}
	if o.Recipe == "" {
		o.Recipe = b.Recipe.Path
	}
	return instance.Create(ctx, p.Store, b.Engine, b.Golden, o)
}
