package golden

import (
	"fmt"
	"sort"

	"github.com/dbfork/dbfork/internal/store"
)

// Explain says why a recipe's golden differs from the one it used
// before (the golden this recipe used last, other than g): which inputs
// changed, came or went, and whether the server or init options did.
// prev is nil on a recipe's first build in this store.
func Explain(s *store.Store, recipePath string, g *Golden) (prev *Golden, changes []string) {
	all, err := List(s)
	if err != nil {
		return nil, nil
	}
	var prevUsed int64
	for _, o := range all {
		if o.Key == g.Key || o.Manifest.Intermediate != nil {
			continue
		}
		used, recipe := lastUse(s, o)
		if recipe != recipePath {
			continue
		}
		if prev == nil || used.UnixNano() > prevUsed {
			prev, prevUsed = o, used.UnixNano()
		}
	}
	if prev == nil {
		return nil, nil
	}
	a, b := prev.Manifest, g.Manifest
	if a.Engine != b.Engine || a.EngineVersion != b.EngineVersion {
		changes = append(changes, fmt.Sprintf("server %s %s → %s %s", a.Engine, a.EngineVersion, b.Engine, b.EngineVersion))
	}
	for k, v := range b.InitOptions {
		if a.InitOptions[k] != v {
			changes = append(changes, fmt.Sprintf("init option %s %q → %q", k, a.InitOptions[k], v))
		}
	}
	type slot struct {
		step int
		path string
	}
	old := map[slot]Input{}
	for _, in := range a.Inputs {
		old[slot{in.Step, in.Path}] = in
	}
	var lines []string
	for _, in := range b.Inputs {
		k := slot{in.Step, in.Path}
		o, ok := old[k]
		delete(old, k)
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("added step %d %s", in.Step, in.Path))
		case o.SHA256 != in.SHA256 || o.Kind != in.Kind:
			lines = append(lines, fmt.Sprintf("changed step %d %s", in.Step, in.Path))
		}
	}
	for k := range old {
		lines = append(lines, fmt.Sprintf("removed step %d %s", k.step, k.path))
	}
	sort.Strings(lines)
	changes = append(changes, lines...)
	if fmt.Sprint(a.Commands) != fmt.Sprint(b.Commands) {
		changes = append(changes, "a run step's command changed")
	}
	return prev, changes
}
