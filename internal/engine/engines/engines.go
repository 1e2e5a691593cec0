// Package engines picks the engine implementation a recipe names: an
// installed server when one matches, else a build from the engine cache
// (fetched on demand).
package engines

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/errs"
)

// Open locates installed server binaries for r (no engine cache), and
// refuses settings the engine keeps for itself. An engine no driver
// registered is the recipe's mistake (engine.DriverFor).
func Open(ctx context.Context, r engine.Want) (engine.Engine, error) {
	d, err := engine.DriverFor(r)
	if err != nil {
		return nil, err
	}
	e, err := d.Open(ctx, r.Bindir, r.Version)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckSettings(e, r.Settings); err != nil {
		return nil, err
	}
	return e, nil
}

// Opener opens engines with an engine cache behind the installed ones.
type Opener struct {
	Cache   *fetch.Cache // nil: installed servers only
	Offline *fetch.Cache // the same cache with downloads off (recipes with fetch = false)
}

// NewOpener returns an Opener over the cache o describes.
func NewOpener(o fetch.Options) *Opener {
	off := o
	off.Offline = true
	return &Opener{Cache: fetch.New(o), Offline: fetch.New(off)}
}

// Open returns an installed server matching r, else (when r names a
// version and no bindir) a cached or fetched build.
func (o *Opener) Open(ctx context.Context, r engine.Want) (engine.Engine, error) {
	eng, err := Open(ctx, r)
	if err == nil || o == nil || o.Cache == nil || r.Bindir != "" || r.Version == "" || !errors.Is(err, errs.ErrMissingTool) {
		return eng, err
	}
	d, derr := engine.DriverFor(r)
	if derr != nil {
		return nil, err
	}
	r.Engine = d.Name // an alias fetches as its engine
	if _, perr := fetch.PackageFor(r.Engine); perr != nil {
		return nil, err
	}
	if d.Oldest != "" && olderThan(r.Version, d.Oldest) {
		return nil, fmt.Errorf("%w; dbfork runs %s %s and later, so it does not fetch %s", err, r.Engine, d.Oldest, r.Version)
	}
	cache := o.Cache
	if r.NoFetch {
		cache = o.Offline
	}
	in, ferr := cache.Ensure(ctx, r.Engine, r.Version)
	if ferr != nil {
		return nil, fmt.Errorf("no installed %s %s, and the engine cache cannot supply one: %w", r.Engine, r.Version, ferr)
	}
	eng, err = OpenInstalled(ctx, in, cache)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckSettings(eng, r.Settings); err != nil {
		return nil, err
	}
	return eng, nil
}

// OpenInstalled opens a build from the engine cache.
func OpenInstalled(ctx context.Context, in *fetch.Installed, cache *fetch.Cache) (engine.Engine, error) {
	d, err := engine.Lookup(in.Engine)
	if err != nil || d.OpenCached == nil {
		return nil, errs.Unsupported("engine cache entry %s: unknown engine %q", in.Name, in.Engine)
	}
	return d.OpenCached(ctx, engine.CachedBuild{Dir: in.Dir, BinDir: in.BinDir(), ClientDirs: clientDirs(cache, d)})
}

// ClientDirs are the cached builds that carry client tools, so a server
// build without them can borrow newer ones (PostgreSQL: psql, pg_restore).
func ClientDirs(cache *fetch.Cache) []string {
	var dirs []string
	for _, d := range engine.Drivers() {
		dirs = append(dirs, clientDirs(cache, d)...)
	}
	return dirs
}

// clientDirs are the bin dirs of d's cached builds holding d's client tool.
func clientDirs(cache *fetch.Cache, d *engine.Driver) []string {
	if cache == nil || d.Client.Tool == "" {
		return nil
	}
	all, _ := cache.List()
	var dirs []string
	for _, in := range all {
		if in.Engine != d.Name {
			continue
		}
		bin := in.BinDir()
		if _, err := os.Stat(filepath.Join(bin, d.Client.Tool)); err == nil {
			dirs = append(dirs, bin)
		}
	}
	return dirs
}
