package golden

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
)

// Problem is one way a golden differs from its manifest.
type Problem struct {
	Path string `json:"path"`
	What string `json:"what"`
}

func (p Problem) String() string { return p.Path + ": " + p.What }

// Verify compares a golden's data dir with its manifest: every file
// present with its type, mode and size, no file added, and with full set
// the content of every regular file against its sha256.
func Verify(g *Golden, full bool) ([]Problem, error) {
	root := g.DataDir()
	want := map[string]File{}
	for _, f := range g.Manifest.Files {
		want[f.Path] = f
	}
	var out []Problem
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, Problem{rel, "unreadable: " + err.Error()})
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		seen[rel] = true
		f, ok := want[rel]
		if !ok {
			out = append(out, Problem{rel, "not in the manifest (added after the build)"})
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			out = append(out, Problem{rel, "unreadable: " + err.Error()})
			return nil
		}
		if fs.FileMode(f.Mode).Type() != fi.Mode().Type() {
			out = append(out, Problem{rel, fmt.Sprintf("type changed (%v, manifest %v)", fi.Mode().Type(), fs.FileMode(f.Mode).Type())})
			return nil
		}
		// Set-id and sticky bits count too: a golden file turned setuid is
		// a change, not a detail.
		if modeBits(fs.FileMode(f.Mode)) != modeBits(fi.Mode()) {
			out = append(out, Problem{rel, fmt.Sprintf("mode %v, manifest %v", modeBits(fi.Mode()), modeBits(fs.FileMode(f.Mode)))})
		}
		// And even where the manifest agrees (goldens published before
		// they were cleaned of set-id bits): never cloned (entries.go).
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if why := badType(st.Mode, uint64(st.Nlink)); why != "" {
				out = append(out, Problem{rel, why + ", which no golden may hold"})
				return nil
			}
			if why := badBits(st.Mode); why != "" {
				out = append(out, Problem{rel, why + ", which no golden may hold"})
			}
		}
		switch {
		case fi.Mode().IsRegular():
			if fi.Size() != f.Size {
				out = append(out, Problem{rel, fmt.Sprintf("size %d, manifest %d", fi.Size(), f.Size)})
			} else if full {
				sum, err := fileSum(p)
				if err != nil {
					out = append(out, Problem{rel, "unreadable: " + err.Error()})
				} else if sum != f.SHA256 {
					out = append(out, Problem{rel, "content changed (sha256 differs)"})
				}
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			if l, _ := os.Readlink(p); l != f.Link {
				out = append(out, Problem{rel, fmt.Sprintf("symlink to %q, manifest %q", l, f.Link)})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("verify golden %s: %w", short(g.Key), err)
	}
	for p := range want {
		if !seen[p] {
			out = append(out, Problem{p, "missing"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// CheckClonable is the quick check made before every clone: the file
// set, types, modes and sizes (a stat per file; content is left to
// `dbfork verify`). A golden that fails it is never cloned. A pass is
// trusted for checkTTL in this process: a pool resetting and recycling
// instances of one golden back to back would otherwise stat its 1,000+
// files before each (35 ms of a ~100 ms reset here).
func CheckClonable(g *Golden) error {
	if st := g.Manifest.Intermediate; st != nil {
		return errs.Invalid("golden %s is an intermediate golden (the state after step %d of %d of %s), kept only for builds to start from; clone the recipe's golden instead", short(g.Key), st.Step, st.Steps, g.Manifest.Recipe)
	}
	if t, ok := checked.Load(g.Dir); ok && time.Since(t.(time.Time)) < checkTTL {
		return nil
	}
	if err := checkClonable(g); err != nil {
		checked.Delete(g.Dir)
		return err
	}
	checked.Store(g.Dir, time.Now())
	return nil
}

// checkTTL is how long a passed CheckClonable is trusted; goldens are
// root-only and never written after publishing, so this only bounds how
// late damage by hand or by the disk is noticed.
const checkTTL = 10 * time.Second

var checked sync.Map // golden dir -> time.Time of the last pass

func checkClonable(g *Golden) error {
	// Goldens published before their dir became root-only get it now.
	if fi, err := os.Stat(g.Dir); err == nil && os.Geteuid() == 0 && fi.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(g.Dir, 0o700)
	}
	probs, err := Verify(g, false)
	if err != nil {
		return err
	}
	if len(probs) == 0 {
		return nil
	}
	return errs.Conflict("golden %s no longer matches its manifest (%s); it will not be cloned: run `dbfork verify --remove %s`, then `dbfork build`",
		short(g.Key), summarize(probs), short(g.Key))
}

func summarize(probs []Problem) string {
	var parts []string
	for i, p := range probs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(probs)-3))
			break
		}
		parts = append(parts, p.String())
	}
	return strings.Join(parts, "; ")
}

// modeBits are the permission, set-id and sticky bits of m.
func modeBits(m fs.FileMode) fs.FileMode {
	return m & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}
