package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Goldens expire: every migration change leaves a complete golden behind,
// and nothing used to remove one a recipe no longer asks for. The store
// records when each golden was last used (built, found by a build, or
// cloned) and for which recipe, in STORE/cache/uses/KEY: the file's
// mtime is the time, its content the recipe path. Pins live in
// STORE/pins/KEY and keep a golden whatever its age.

func usesDir(s *store.Store) string { return filepath.Join(s.CacheDir(), "uses") }
func pinsDir(s *store.Store) string { return filepath.Join(s.Root, "pins") }

// MarkUsed records that the golden with this key was just used, for
// recipe (an absolute path; empty keeps the recipe recorded before). It
// never fails a command: a store whose cache cannot be written only loses
// precision in which goldens gc keeps.
func MarkUsed(s *store.Store, key, recipe string) {
	if !validKey(key) {
		return
	}
	dir := usesDir(s)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	p := filepath.Join(dir, key)
	if recipe == "" {
		now := time.Now()
		if os.Chtimes(p, now, now) == nil {
			return
		}
	}
	// A new file then a rename: a reader never sees it half written.
	tmp := p + ".tmp-" + textutil.Password()[:8]
	if err := os.WriteFile(tmp, []byte(recipe+"\n"), 0o600); err != nil {
		return
	}
	if os.Rename(tmp, p) != nil {
		os.Remove(tmp)
	}
}

// lastUse reads the use record of key: when and for which recipe. A
// golden with no record (published before records existed, or pulled)
// counts as used when it was published here (its manifest's mtime: a
// pulled golden's Created is the day it was built elsewhere), for the
// recipe its manifest names.
func lastUse(s *store.Store, g *Golden) (time.Time, string) {
	p := filepath.Join(usesDir(s), g.Key)
	fi, err := os.Stat(p)
	if err != nil {
		if mfi, err := os.Stat(filepath.Join(g.Dir, ManifestName)); err == nil {
			return mfi.ModTime(), g.Manifest.Recipe
		}
		return g.Manifest.Created, g.Manifest.Recipe
	}
	recipe := g.Manifest.Recipe
	if b, err := os.ReadFile(p); err == nil {
		if r := strings.TrimSpace(string(b)); r != "" {
			recipe = r
		}
	}
	return fi.ModTime(), recipe
}

// Pin keeps a golden from expiring; Unpin lets it expire again.
func Pin(s *store.Store, key string) error {
	if !validKey(key) {
		return errs.Invalid("golden key %q is not a sha256 hex string", key)
	}
	if err := os.MkdirAll(pinsDir(s), 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pinsDir(s), key), nil, 0o600)
}

// Unpin removes a pin; a golden that was not pinned is not an error.
func Unpin(s *store.Store, key string) error {
	err := os.Remove(filepath.Join(pinsDir(s), key))
	if os.IsNotExist(err) {
		return nil
	}
	return err
}

// Pinned reports whether key is pinned.
func Pinned(s *store.Store, key string) bool {
	_, err := os.Stat(filepath.Join(pinsDir(s), key))
	return err == nil
}

// ExpiryRule says which goldens gc keeps.
type ExpiryRule struct {
	// Keep is how many goldens each recipe keeps: the ones it used last.
	Keep int
	// MinIdle: a golden used more recently than this is kept whatever
	// the other rules say (a clone may be on its way).
	MinIdle time.Duration
	// Budget, when above 0, is the most bytes all goldens may take: the
	// least recently used goldens go first until the rest fit.
	Budget int64
	// InUse holds the keys running instances and leases clone from.
	InUse map[string]bool
}

// Expired is one golden gc may remove, and why.
type Expired struct {
	Key      string    `json:"key"`
	Recipe   string    `json:"recipe"`
	LastUsed time.Time `json:"last_used"`
	Bytes    int64     `json:"bytes"`
	Reason   string    `json:"reason"`
}

// Expire lists the goldens the rule does not keep, least recently used
// first. It removes nothing.
func Expire(s *store.Store, rule ExpiryRule, now time.Time) ([]Expired, error) {
	all, err := List(s)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	type cand struct {
		g      *Golden
		used   time.Time
		recipe string
		kept   bool // by recipe rank
	}
	var cs []*cand
	// Finals and intermediates are ranked apart: a recipe's intermediate
	// goldens never push its finals out of its last Keep.
	byRecipe, stepsByRecipe := map[string][]*cand{}, map[string][]*cand{}
	for _, g := range all {
		used, recipe := lastUse(s, g)
		c := &cand{g: g, used: used, recipe: recipe}
		cs = append(cs, c)
		if g.Manifest.Intermediate != nil {
			stepsByRecipe[recipe] = append(stepsByRecipe[recipe], c)
		} else {
			byRecipe[recipe] = append(byRecipe[recipe], c)
		}
	}
	rank := func(groups map[string][]*cand) {
		for _, group := range groups {
			sort.Slice(group, func(i, j int) bool { return group[i].used.After(group[j].used) })
			for i, c := range group {
				c.kept = i < rule.Keep
			}
		}
	}
	rank(byRecipe)
	rank(stepsByRecipe)
	// Least recently used first: the order both rules remove in.
	sort.Slice(cs, func(i, j int) bool { return cs[i].used.Before(cs[j].used) })
	var total int64
	for _, c := range cs {
		total += c.g.Manifest.Disk()
	}
	protected := func(c *cand) bool {
		return rule.InUse[c.g.Key] || Pinned(s, c.g.Key) || now.Sub(c.used) < rule.MinIdle
	}
	// An intermediate golden is kept while a kept final golden was built
	// through it (its step keys name it), whatever its own rank: the next
	// change to that recipe's migrations starts from it.
	through := map[string]bool{}
	for _, c := range cs {
		if c.g.Manifest.Intermediate == nil && (c.kept || protected(c)) {
			for _, k := range c.g.Manifest.StepKeys {
				through[k] = true
			}
		}
	}
	var out []Expired
	removed := map[string]bool{}
	for _, c := range cs {
		if c.kept || protected(c) || through[c.g.Key] {
			continue
		}
		removed[c.g.Key] = true
		total -= c.g.Manifest.Disk()
		reason := fmt.Sprintf("not among the last %d goldens of its recipe", rule.Keep)
		if c.g.Manifest.Intermediate != nil {
			reason = fmt.Sprintf("intermediate golden no kept golden was built from, not among the last %d of its recipe", rule.Keep)
		}
		out = append(out, Expired{Key: c.g.Key, Recipe: c.recipe, LastUsed: c.used, Bytes: c.g.Manifest.Disk(), Reason: reason})
	}
	if rule.Budget > 0 {
		for _, c := range cs {
			if total <= rule.Budget {
				break
			}
			if removed[c.g.Key] || protected(c) {
				continue
			}
			removed[c.g.Key] = true
			total -= c.g.Manifest.Disk()
			out = append(out, Expired{Key: c.g.Key, Recipe: c.recipe, LastUsed: c.used, Bytes: c.g.Manifest.Disk(),
				Reason: "least recently used beyond the store's budget"})
		}
	}
	return out, nil
}

// ForgetUse drops the use record and pin of a golden that is gone.
func ForgetUse(s *store.Store, key string) {
	os.Remove(filepath.Join(usesDir(s), key))
}

// ReapUses removes use records of goldens that no longer exist (removed
// by verify, by hand, or by a crash between removal and ForgetUse).
func ReapUses(s *store.Store) {
	entries, _ := os.ReadDir(usesDir(s))
	for _, e := range entries {
		name := e.Name()
		if strings.Contains(name, ".tmp-") {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(filepath.Join(usesDir(s), name))
			}
			continue
		}
		if _, err := os.Lstat(s.GoldenDir(name)); os.IsNotExist(err) {
			os.Remove(filepath.Join(usesDir(s), name))
		}
	}
}
