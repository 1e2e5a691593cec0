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
	"github.com/dbfork/dbfork/internal/engine/mysql"
	"github.com/dbfork/dbfork/internal/engine/postgres"
	"github.com/dbfork/dbfork/internal/errs"
)

// Open locates installed server binaries for r (no engine cache), and
// refuses settings the engine keeps for itself.
func Open(ctx context.Context, r engine.Want) (engine.Engine, error) {
	e, err := open(ctx, r)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckSettings(e, r.Settings); err != nil {
		return nil, err
	}
	return e, nil
}

func open(ctx context.Context, r engine.Want) (engine.Engine, error) {
	e, err := Lookup(r.Engine)
	if err != nil {
		return nil, err
	}
	return e.Open(ctx, r.Bindir, r.Version)
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
	if _, perr := fetch.PackageFor(r.Engine); perr != nil {
		return nil, err
	}
	if e, lerr := Lookup(r.Engine); lerr == nil && e.Oldest != "" && olderThan(r.Version, e.Oldest) {
		return nil, fmt.Errorf("%w; dbfork runs %s %s and later, so it does not fetch %s", err, r.Engine, e.Oldest, r.Version)
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
	switch in.Engine {
	case "postgres":
		return postgres.NewAt(ctx, in.BinDir(), ClientDirs(cache))
	case "mariadb":
		return mysql.NewAt(ctx, mysql.MariaDB, in.Dir)
	}
	return nil, errs.Unsupported("engine cache entry %s: unknown engine %q", in.Name, in.Engine)
}

// ClientDirs are the cached PostgreSQL builds that carry client tools, so
// a server build without them can borrow a newer psql and pg_restore.
func ClientDirs(cache *fetch.Cache) []string {
	if cache == nil {
		return nil
	}
	all, _ := cache.List()
	var dirs []string
	for _, in := range all {
		if in.Engine != "postgres" {
			continue
		}
		bin := in.BinDir()
		if _, err := os.Stat(filepath.Join(bin, "psql")); err == nil {
			dirs = append(dirs, bin)
		}
	}
	return dirs
}
