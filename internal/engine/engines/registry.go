package engines

import (
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	// The drivers: each registers itself with engine.Register from its
	// init. This is the one list of them; every binary and test that
	// opens engines through this package gets them all.
	_ "github.com/dbfork/dbfork/internal/engine/mysql"
	_ "github.com/dbfork/dbfork/internal/engine/postgres"
)

// Entry is everything dbfork knows about one engine outside its own
// package: its registered driver (see engine.Driver).
type Entry = engine.Driver

// Lookup returns the entry of an engine name or alias.
func Lookup(name string) (Entry, error) {
	d, err := engine.Lookup(name)
	if err != nil {
		return Entry{}, err
	}
	return *d, nil
}

// Names are the engines dbfork runs, in a stable order.
func Names() []string { return engine.Names() }

// olderThan compares dotted versions numerically ("9.6" < "11").
func olderThan(v, oldest string) bool {
	a, b := strings.Split(v, "."), strings.Split(oldest, ".")
	for i := 0; i < len(a) && i < len(b); i++ {
		x, errx := strconv.Atoi(a[i])
		y, erry := strconv.Atoi(b[i])
		if errx != nil || erry != nil {
			return false
		}
		if x != y {
			return x < y
		}
	}
	return false
}
