package golden

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
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
//
// The walk goes by directory descriptors (a stat relative to its
// directory, not a path from /), a directory per goroutine on every core:
// a golden with slots has 8.8 times the files of one without, and this is
// the check made before each clone.
func Verify(g *Golden, full bool) ([]Problem, error) {
	return verify(g, full, runtime.NumCPU())
}

// verify is Verify on at most threads threads.
func verify(g *Golden, full bool, threads int) ([]Problem, error) {
	return verifyWithout(g, full, threads, nil)
}

// verifyWithout is verify with the dirs in skip (relative to the data
// dir) left out: each is checked as an entry of its parent, nothing
// below it.
func verifyWithout(g *Golden, full bool, threads int, skip map[string]bool) ([]Problem, error) {
	root := g.DataDir()
	files, err := g.Manifest.filesWithout(skip)
	if err != nil {
		return nil, fmt.Errorf("verify golden %s: bad manifest: %w", short(g.Key), err)
	}
	want := make(map[string]File, len(files))
	for _, f := range files {
		want[f.Path] = f
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("verify golden %s: %w", short(g.Key), &os.PathError{Op: "open", Path: root, Err: err})
	}
	v := &verifier{root: root, want: want, full: full, skip: skip, seen: make(map[string]bool, len(want)),
		sem: make(chan struct{}, max(0, threads-1))}
	v.wg.Add(1)
	v.dir(fd, "")
	v.wg.Wait()
	out := v.out
	for p := range want {
		if !v.seen[p] {
			out = append(out, Problem{p, "missing"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// verifier is one Verify under way.
type verifier struct {
	root string
	want map[string]File
	full bool
	skip map[string]bool // dirs not walked (verifyWithout)
	sem  chan struct{}   // bounds the directories read at once
	wg   sync.WaitGroup

	mu   sync.Mutex
	out  []Problem
	seen map[string]bool
}

func (v *verifier) problem(rel, what string) {
	v.mu.Lock()
	v.out = append(v.out, Problem{rel, what})
	v.mu.Unlock()
}

// dir checks every entry of the directory open at fd (rel from the data
// dir, "" for the data dir itself) and hands its subdirectories to
// goroutines of their own where a core is free. It closes fd and marks
// v.wg done.
func (v *verifier) dir(fd int, rel string) {
	defer v.wg.Done()
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		v.problem(orDot(rel), "unreadable: "+err.Error())
		return
	}
	seen := make([]string, 0, len(names))
	for _, name := range names {
		r := name
		if rel != "" {
			r = rel + "/" + name
		}
		seen = append(seen, r)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			v.problem(r, "unreadable: "+err.Error())
			continue
		}
		wf, known := v.want[r]
		if !known {
			v.problem(r, "not in the manifest (added after the build)")
			continue
		}
		if !v.entry(fd, name, r, wf, &st) || st.Mode&unix.S_IFMT != unix.S_IFDIR || v.skip[r] {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			v.problem(r, "unreadable: "+err.Error())
			continue
		}
		v.wg.Add(1)
		select {
		case v.sem <- struct{}{}:
			go func() {
				defer func() { <-v.sem }()
				v.dir(sub, r)
			}()
		default:
			v.dir(sub, r)
		}
	}
	v.mu.Lock()
	for _, r := range seen {
		v.seen[r] = true
	}
	v.mu.Unlock()
}

// entry compares the entry rel (name in the directory open at dfd) with
// its manifest line f, and says whether the walk goes on below it.
func (v *verifier) entry(dfd int, name, rel string, f File, st *unix.Stat_t) bool {
	mode := fsutil.FileMode(st.Mode)
	if fs.FileMode(f.Mode).Type() != mode.Type() {
		v.problem(rel, fmt.Sprintf("type changed (%v, manifest %v)", mode.Type(), fs.FileMode(f.Mode).Type()))
		return false
	}
	// Set-id and sticky bits count too: a golden file turned setuid is
	// a change, not a detail.
	if modeBits(fs.FileMode(f.Mode)) != modeBits(mode) {
		v.problem(rel, fmt.Sprintf("mode %v, manifest %v", modeBits(mode), modeBits(fs.FileMode(f.Mode))))
	}
	// And even where the manifest agrees (goldens published before
	// they were cleaned of set-id bits): never cloned (entries.go).
	if why := badType(st.Mode, uint64(st.Nlink)); why != "" {
		v.problem(rel, why+", which no golden may hold")
		return false
	}
	if why := badBits(st.Mode); why != "" {
		v.problem(rel, why+", which no golden may hold")
	}
	switch {
	case mode.IsRegular():
		if st.Size != f.Size {
			v.problem(rel, fmt.Sprintf("size %d, manifest %d", st.Size, f.Size))
		} else if v.full {
			sum, err := fileSum(filepath.Join(v.root, rel))
			if err != nil {
				v.problem(rel, "unreadable: "+err.Error())
			} else if sum != f.SHA256 {
				v.problem(rel, "content changed (sha256 differs)")
			}
		}
	case mode&fs.ModeSymlink != 0:
		if l, _ := readlinkAt(dfd, name); l != f.Link {
			v.problem(rel, fmt.Sprintf("symlink to %q, manifest %q", l, f.Link))
		}
	}
	return true
}

// readlinkAt reads the symlink name in the directory open at dfd.
func readlinkAt(dfd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func orDot(rel string) string {
	if rel == "" {
		return "."
	}
	return rel
}

// CheckClonable is the quick check made before every clone: the file
// set, types, modes and sizes (a stat per file; content is left to
// `dbfork verify`). A golden that fails it is never cloned. A pass is
// trusted for checkTTL in this process: a pool resetting and recycling
// instances of one golden back to back would otherwise stat its 1,000+
// files before each (35 ms of a ~100 ms reset here).
func CheckClonable(g *Golden) error { return checkClonableOnce(g, false) }

// CheckClonableSlotsClosed is CheckClonable for an instance that closes
// the golden's slots (ClosableSlots): their dirs are left out, ~10,000
// stats of a 32-slot golden's 11,300. Its server refuses every
// connection to a closed slot, so nothing reads those files.
func CheckClonableSlotsClosed(g *Golden) error { return checkClonableOnce(g, true) }

func checkClonableOnce(g *Golden, slotsClosed bool) error {
	if st := g.Manifest.Intermediate; st != nil {
		return errs.Invalid("golden %s is an intermediate golden (the state after step %d of %d of %s), kept only for builds to start from; clone the recipe's golden instead", short(g.Key), st.Step, st.Steps, g.Manifest.Recipe)
	}
	var skip map[string]bool
	if slotsClosed {
		_, dirs := g.ClosableSlots()
		for _, d := range dirs {
			if skip == nil {
				skip = make(map[string]bool, len(dirs))
			}
			skip[d] = true
		}
	}
	// A pass of the whole golden counts for one without the slots too.
	whole, part := checkedKey{g.Dir, false}, checkedKey{g.Dir, skip != nil}
	for _, k := range []checkedKey{whole, part} {
		if t, ok := checked.Load(k); ok && time.Since(t.(time.Time)) < checkTTL {
			return nil
		}
	}
	if err := checkClonable(g, skip); err != nil {
		checked.Delete(whole)
		checked.Delete(part)
		return err
	}
	checked.Store(part, time.Now())
	return nil
}

// checkedKey is what a pass in checked is for: a golden's dir, whole or
// without its slots.
type checkedKey struct {
	dir         string
	slotsClosed bool
}

// ClosableSlots are the slots an instance that hands none out closes (its
// server refuses connections to them) and the dirs of their files, which
// its check of the golden then leaves out: all of the golden's slots when
// its manifest says where each one is, else none (a golden built before
// slot_dirs were recorded is checked whole and its slots stay open).
func (g *Golden) ClosableSlots() (names, dirs []string) {
	m := g.Manifest
	// The names go into the server's configuration: only the ones a build
	// gives (a pulled manifest could say anything).
	if len(m.Slots) == 0 || len(m.SlotDirs) != len(m.Slots) || !slices.Equal(m.Slots, SlotNames(len(m.Slots))) {
		return nil, nil
	}
	seen := make(map[string]bool, len(m.SlotDirs))
	for _, d := range m.SlotDirs {
		if !slotDirPattern(d) || seen[d] {
			return nil, nil
		}
		seen[d] = true
	}
	return m.Slots, m.SlotDirs
}

// slotDirPattern: the dir of a database the build made, base/<oid> with
// an oid of those given to user objects (from 16384 on: never a
// template's or the postgres database's).
func slotDirPattern(d string) bool {
	n, ok := strings.CutPrefix(d, "base/")
	if !ok || n == "" || n[0] == '0' {
		return false
	}
	oid, err := strconv.ParseUint(n, 10, 32)
	return err == nil && oid >= 16384
}

// topDirs is p up to its first n components.
func topDirs(p string, n int) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			if n--; n == 0 {
				return p[:i]
			}
		}
	}
	return p
}

// checkTTL is how long a passed CheckClonable is trusted; goldens are
// root-only and never written after publishing, so this only bounds how
// late damage by hand or by the disk is noticed.
const checkTTL = 10 * time.Second

var checked sync.Map // checkedKey -> time.Time of the last pass

func checkClonable(g *Golden, skip map[string]bool) error {
	// Goldens published before their dir became root-only get it now.
	if fi, err := os.Stat(g.Dir); err == nil && os.Geteuid() == 0 && fi.Mode().Perm()&0o077 != 0 {
		_ = os.Chmod(g.Dir, 0o700)
	}
	// Two threads at most: the check runs beside the server's start (see
	// instance.Create). `up` of a 32-slot golden (11,324 files) on an
	// idle 2-core machine, median of 9: 36.6 ms on one thread, 34.5 on
	// two (26.8 without slots).
	probs, err := verifyWithout(g, false, min(2, runtime.NumCPU()), skip)
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
