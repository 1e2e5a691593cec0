package golden

import (
	"context"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/store"
)

// Remote is where goldens are shared between machines (an OCI registry,
// see internal/oci): a recipe's [cache] from/to names repositories in it.
type Remote interface {
	// Fetch publishes the golden key from repo into s if repo holds it,
	// verified and atomically, and reports whether it did. The caller
	// holds key's build lock. A repo without the key is (false, nil).
	Fetch(ctx context.Context, s *store.Store, key, repo string) (bool, error)
	// Send pushes g to repo, tagged with its key.
	Send(ctx context.Context, s *store.Store, g *Golden, repo string) error
}

// fetchRemote tries the recipe's cache before a build; a failure is only
// a warning (the build goes on), and says why.
func fetchRemote(ctx context.Context, s *store.Store, key, repo string, o Options) bool {
	if o.Remote == nil || repo == "" {
		return false
	}
	o.Progress.Step("pull " + short(key) + " from " + repo)
	ok, err := o.Remote.Fetch(ctx, s, key, repo)
	if err != nil {
		// One line: the warning where there is one to say, else the log.
		if o.Warn != nil {
			o.Warn("could not pull golden " + short(key) + " from " + repo + " (" + err.Error() + "); building it")
		} else {
			o.Log.Warn("could not pull the golden from the cache; building it", "repo", repo, "key", key, "err", err)
		}
		return false
	}
	if ok {
		// A fetch that says it published key must have: anything else
		// (a golden under another key) is said, and the build goes on.
		if _, err := Lookup(s, key); err != nil {
			o.Log.Warn("the cache reported the golden pulled but the store lacks it; building it", "repo", repo, "key", key)
			if o.Warn != nil {
				o.Warn("pulled golden " + short(key) + " from " + repo + " but the store lacks it; building it")
			}
			return false
		}
	}
	if !ok {
		o.Log.Info("cache has no golden of this key (another recipe or server version gives another key); building", "repo", repo, "key", key)
		if o.Warn != nil {
			o.Warn(repo + " has no golden " + short(key) + " (a different recipe or server version gives a different key); building it")
		}
	}
	return ok
}

// sendRemote pushes a fresh build to the recipe's cache.
func sendRemote(ctx context.Context, s *store.Store, g *Golden, repo string, o Options) error {
	if o.Remote == nil || repo == "" {
		return nil
	}
	o.Progress.Step("push " + short(g.Key) + " to " + repo)
	return o.Remote.Send(ctx, s, g, repo)
}

func buildSettings(eng engine.Engine) map[string]string {
	if bt, ok := eng.(engine.BuildTuner); ok {
		return bt.BuildSettings()
	}
	return nil
}
