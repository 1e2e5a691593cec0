package engine

import (
	"sort"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// SettingsChecker is implemented by engines that refuse some recipe
// [settings]: the ones dbfork sets itself to keep an instance where its
// DSN says (address, port, socket and its permissions, data and auth
// files). A recipe that could set them would move a server off 127.0.0.1
// or open its socket to every local user while the DSN still says
// otherwise.
type SettingsChecker interface {
	CheckSettings(settings map[string]string) error
}

// CheckSettings asks e, when it checks settings.
func CheckSettings(e Engine, settings map[string]string) error {
	if c, ok := e.(SettingsChecker); ok {
		return c.CheckSettings(settings)
	}
	return nil
}

// RefuseProtected is the shared body of CheckSettings: normalize turns a
// key into the engine's canonical spelling (or "" when it cannot be
// told apart from a protected one), protected holds the canonical names.
func RefuseProtected(settings map[string]string, normalize func(string) string, protected map[string]bool) error {
	var bad []string
	for k := range settings {
		n := normalize(k)
		if n == "" || protected[n] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return errs.Invalid("recipe [settings]: %s %s set by dbfork (address, port, socket, auth and data paths keep each instance where its DSN says); remove %s",
		strings.Join(bad, ", "), map[bool]string{true: "is", false: "are"}[len(bad) == 1], map[bool]string{true: "it", false: "them"}[len(bad) == 1])
}
