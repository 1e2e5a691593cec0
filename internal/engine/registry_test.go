package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// fullDriver is a Driver with every part, required or not, filled in.
func fullDriver(name string) Driver {
	open := func(context.Context, string, string) (Engine, error) { return nil, errors.New("fake") }
	return Driver{
		Name: name, Aliases: []string{name + "ql"}, Order: 1,
		Open:              open,
		OpenCached:        func(context.Context, CachedBuild) (Engine, error) { return nil, errors.New("fake") },
		Stop:              Traits{CleanStop: syscall.SIGINT, FastStop: syscall.SIGQUIT},
		MemoryPerInstance: 1 << 20,
		RelationNames:     func(context.Context, *Conn, bool) func(string) string { return nil },
		Installed:         func(context.Context) (string, string, error) { return "", "", nil },
		Major:             func(v string) string { return v },
		Bench: BenchKit{
			Dataset: func(int64) (string, string, int64) { return "", "", 0 },
			Insert:  func(map[string]string, string, string, int64, int) ([]string, []string) { return nil, nil },
			Update:  func(string) string { return "" },
			OpenDB:  func(string, map[string]string) (*sql.DB, error) { return nil, nil },
		},
		ShortVersion: func(string) string { return "" },
		Fetch: Fetch{
			Maven: &Package{Group: "g", Artifact: map[string]string{"amd64": "a"}, Format: "f", Probe: []string{"x"}},
			PyPI:  &Package{Project: "p", Format: "f", Probe: []string{"x"}},
		},
		Client: ClientEnv{Prefixes: []string{"FAKE_"}, HostVars: []string{"FAKE_HOST"}, SocketVars: []string{"FAKE_SOCKET"}},
	}
}

// registerPanic registers d in a registry of its own and returns what it
// panicked with ("" when it did not).
func registerPanic(r *registry, d Driver) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	r.add(d)
	return ""
}

// A driver missing any required part is refused at Register, with a
// message naming the part; a complete one is taken.
func TestRegisterRefusesIncompleteDriver(t *testing.T) {
	if msg := registerPanic(&registry{}, fullDriver("fake")); msg != "" {
		t.Fatalf("a complete driver: %s", msg)
	}
	for part, blank := range map[string]func(d *Driver){
		"Name":              func(d *Driver) { d.Name = "" },
		"Aliases":           func(d *Driver) { d.Aliases = []string{"Not A Name"} },
		"Open":              func(d *Driver) { d.Open = nil },
		"OpenCached":        func(d *Driver) { d.OpenCached = nil },
		"Stop":              func(d *Driver) { d.Stop.FastStop = 0 },
		"MemoryPerInstance": func(d *Driver) { d.MemoryPerInstance = 0 },
		"RelationNames":     func(d *Driver) { d.RelationNames = nil },
		"Installed":         func(d *Driver) { d.Installed = nil },
		"Major":             func(d *Driver) { d.Major = nil },
		"Bench":             func(d *Driver) { d.Bench.OpenDB = nil },
		"ShortVersion":      func(d *Driver) { d.ShortVersion = nil },
		"Client.Prefixes":   func(d *Driver) { d.Client.Prefixes = nil },
		"Fetch.Maven":       func(d *Driver) { d.Fetch.Maven.Artifact = nil },
		"Fetch.PyPI":        func(d *Driver) { d.Fetch.PyPI.Project = "" },
	} {
		d := fullDriver("fake")
		blank(&d)
		msg := registerPanic(&registry{}, d)
		if !strings.HasPrefix(msg, "engine.Register: ") || !strings.Contains(msg, "lacks "+part) && !strings.Contains(msg, ", "+part) {
			t.Errorf("driver without %s: panic %q", part, msg)
		}
	}
	// Without fetch packages, OpenCached is not needed.
	d := fullDriver("fake")
	d.Fetch, d.OpenCached = Fetch{}, nil
	if msg := registerPanic(&registry{}, d); msg != "" {
		t.Errorf("a driver without fetched builds: %s", msg)
	}
	r := &registry{}
	r.add(fullDriver("fake"))
	dup := fullDriver("other")
	dup.Aliases = []string{"fake"}
	if msg := registerPanic(r, dup); !strings.Contains(msg, `"fake" registered twice`) {
		t.Errorf("a name taken twice: panic %q", msg)
	}
}

// Names, aliases, order, and what is asked of every driver.
func TestRegistry(t *testing.T) {
	old := drivers
	t.Cleanup(func() { drivers = old })
	drivers = &registry{}
	b, a := fullDriver("bee"), fullDriver("ant")
	b.Order, a.Order, a.Slots = 0, 1, true
	a.ShortVersion = func(s string) string {
		if v, ok := strings.CutPrefix(s, "ant "); ok {
			return v
		}
		return ""
	}
	Register(a)
	Register(b)
	if got := Names(); !reflect.DeepEqual(got, []string{"bee", "ant"}) {
		t.Errorf("names in order: %v", got)
	}
	if d, err := Lookup("antql"); err != nil || d.Name != "ant" {
		t.Errorf("alias: %v %v", d, err)
	}
	_, err := Lookup("oracle")
	if !errors.Is(err, errs.ErrUnsupported) || !strings.Contains(err.Error(), "use bee, ant") {
		t.Errorf("unknown name: %v", err)
	}
	_, err = DriverFor(Want{Engine: "oracle", Recipe: "dbfork.toml"})
	if !errors.Is(err, errs.ErrInvalid) || err.Error() != `dbfork.toml: unknown engine "oracle" (use "bee" or "ant")` {
		t.Errorf("a recipe's unknown engine: %v", err)
	}
	if err := CheckSlots("antql", "dbfork.toml", 3); err != nil {
		t.Errorf("slots on an engine that has them: %v", err)
	}
	err = CheckSlots("bee", "dbfork.toml", 3)
	if !errors.Is(err, errs.ErrInvalid) || err.Error() != `dbfork.toml: [fresh] slots works with engine = "ant" only (a bee database cannot be copied as files); remove it, leases reset in place instead` {
		t.Errorf("slots on an engine without: %v", err)
	}
	if CheckSlots("bee", "dbfork.toml", 0) != nil {
		t.Error("no slots asked: refused")
	}
	if v := ShortVersion("ant 1.2"); v != "1.2" {
		t.Errorf("banner: %q", v)
	}
	if v := ShortVersion("who knows"); v != "who knows" {
		t.Errorf("unknown banner: %q", v)
	}
	env := map[string]string{"FAKE_HOST": "/run/sock", "FAKE_SOCKET": "/run/sock/s", "FAKE_USER": "u"}
	TCPOnly(env)
	if !reflect.DeepEqual(env, map[string]string{"FAKE_HOST": "127.0.0.1", "FAKE_USER": "u"}) {
		t.Errorf("tcp only: %v", env)
	}
	if !ClientVar("FAKE_USER") || ClientVar("HOME") || !passedToOthers("FAKE_X") || passedToOthers("HOMEX") {
		t.Error("client variables")
	}
	if tr := TraitsOf("antql"); tr.CleanStop != syscall.SIGINT || tr.FastStop != syscall.SIGQUIT {
		t.Errorf("traits by alias: %+v", tr)
	}
}
