package engine

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/dbfork/dbfork/internal/errs"
)

// registry holds the registered drivers by name and by alias.
type registry struct {
	mu     sync.RWMutex
	byName map[string]*Driver // names and aliases
	all    []*Driver          // in Order
}

var drivers = &registry{}

// Register adds an engine driver; driver packages call it from init. A
// driver missing a required part, or a name or alias already taken, is a
// programming error and panics with what is wrong.
func Register(d Driver) { drivers.add(d) }

func (r *registry) add(d Driver) {
	if err := d.Check(); err != nil {
		panic("engine.Register: " + err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName = map[string]*Driver{}
	}
	p := &d
	for _, n := range append([]string{d.Name}, d.Aliases...) {
		if _, dup := r.byName[n]; dup {
			panic(fmt.Sprintf("engine.Register: engine name %q registered twice", n))
		}
		r.byName[n] = p
	}
	r.all = append(r.all, p)
	sort.SliceStable(r.all, func(i, j int) bool {
		if r.all[i].Order != r.all[j].Order {
			return r.all[i].Order < r.all[j].Order
		}
		return r.all[i].Name < r.all[j].Name
	})
}

func (r *registry) lookup(name string) (*Driver, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.byName[name]
	return d, ok
}

func (r *registry) list() []*Driver {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]*Driver(nil), r.all...)
}

// Lookup returns the driver of an engine name or alias.
func Lookup(name string) (*Driver, error) {
	if d, ok := drivers.lookup(name); ok {
		return d, nil
	}
	return nil, errs.Unsupported("engine %q is not supported (use %s)", name, strings.Join(Names(), ", "))
}

// Drivers are the registered drivers, in listing order.
func Drivers() []*Driver { return drivers.list() }

// Names are the registered engines' names, in listing order.
func Names() []string {
	var out []string
	for _, d := range Drivers() {
		out = append(out, d.Name)
	}
	return out
}

// DriverFor is the driver a recipe's choice names: an unknown engine is
// the recipe's mistake, told in one line with the names to use.
func DriverFor(w Want) (*Driver, error) {
	if d, ok := drivers.lookup(w.Engine); ok {
		return d, nil
	}
	prefix := ""
	if w.Recipe != "" {
		prefix = w.Recipe + ": "
	}
	var quoted []string
	for _, n := range Names() {
		quoted = append(quoted, fmt.Sprintf("%q", n))
	}
	return nil, errs.Invalid("%sunknown engine %q (use %s)", prefix, w.Engine, orList(quoted))
}

// CheckSlots refuses [fresh] slots on an engine whose golden cannot carry
// them; recipe names the recipe file.
func CheckSlots(engineName, recipe string, slots int) error {
	if slots <= 0 {
		return nil
	}
	if d, ok := drivers.lookup(engineName); ok && d.Slots {
		return nil
	}
	var with []string
	for _, d := range Drivers() {
		if d.Slots {
			with = append(with, fmt.Sprintf("engine = %q", d.Name))
		}
	}
	return errs.Invalid("%s: [fresh] slots works with %s only (a %s database cannot be copied as files); remove it, leases reset in place instead", recipe, orList(with), engineName)
}

// orList joins "a", "b" and "c" as `a, b or c`.
func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// ClientPrefixes are the prefixes of every registered engine's client
// variables.
func ClientPrefixes() []string {
	var out []string
	for _, d := range Drivers() {
		out = append(out, d.Client.Prefixes...)
	}
	return out
}

// ShortVersion is the version number in a server's version banner
// ("15.18" of "postgres (PostgreSQL) 15.18 (Debian ...)"), or the banner
// itself when no registered engine recognises it.
func ShortVersion(banner string) string {
	for _, d := range Drivers() {
		if v := d.ShortVersion(banner); v != "" {
			return v
		}
	}
	return banner
}

// ClientVar says whether k is a variable some registered engine's clients
// read (see ClientEnv.Prefixes).
func ClientVar(k string) bool {
	for _, p := range ClientPrefixes() {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
