package recipe

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// resolve makes an input name absolute: ~/ is the home dir, relative
// names are relative to the recipe dir.
func (r *Recipe) resolve(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.Dir, p)
	}
	return filepath.Clean(p)
}

// Rel names a file relative to the recipe directory when it lies below it.
func (r *Recipe) Rel(p string) string {
	if rel, err := filepath.Rel(r.Dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// expand resolves one pattern: a glob, a file, or a directory (every
// regular file below it, sorted by path, which is how migration tools
// order their files).
func (r *Recipe) expand(pattern string) ([]string, error) {
	if strings.TrimSpace(pattern) == "" {
		return nil, fmt.Errorf("empty file name")
	}
	full := r.resolve(pattern)
	matches, err := filepath.Glob(full)
	if err != nil {
		return nil, fmt.Errorf("bad pattern %q: %v", pattern, err)
	}
	if len(matches) == 0 {
		// Expanded with the rights of whoever asked (caller.AsFS):
		// in a dir they cannot search, names that exist and names that do
		// not get the same answer.
		if strings.ContainsAny(pattern, "*?[") {
			return nil, fmt.Errorf("no file matches %q (relative to %s)", pattern, r.Dir)
		}
		if _, err := os.Stat(full); errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("file %s cannot be reached: permission denied", full)
		}
		return nil, fmt.Errorf("file %s not found", full)
	}
	sort.Strings(matches)
	var out []string
	wild := strings.ContainsAny(pattern, "*?[")
	for _, m := range matches {
		fi, err := os.Stat(m)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m, err)
		}
		if wild && r.skip(m, fi.IsDir()) {
			continue // a glob's match that is a by-product (.dbforkignore)
		}
		if !fi.IsDir() {
			out = append(out, m)
			continue
		}
		err = filepath.WalkDir(m, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != m && r.skip(p, d.IsDir()) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				out = append(out, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", m, err)
		}
	}
	return out, nil
}

// MaxBytes caps a recipe file.
const MaxBytes = 1 << 20

// readRecipe reads a recipe file that must be a regular file: a FIFO or a
// device named (or swapped in) as a recipe fails at once instead of
// hanging the command or feeding it forever.
func readRecipe(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file: name a dbfork.toml")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err == nil && len(data) > MaxBytes {
		err = fmt.Errorf("over %d bytes: not a recipe", MaxBytes)
	}
	return data, err
}
