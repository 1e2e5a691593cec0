package engines

import (
	"context"
	"errors"
	"reflect"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// Every driver this package brings registered whole, and each answers
// what dbfork asked of engine names before the drivers registered
// themselves.
func TestDrivers(t *testing.T) {
	if got := Names(); !reflect.DeepEqual(got, []string{"postgres", "mariadb", "mysql"}) {
		t.Fatalf("registered: %v", got)
	}
	for _, d := range engine.Drivers() {
		if err := d.Check(); err != nil {
			t.Error(err)
		}
		if e, err := Lookup(d.Name); err != nil || e.Name != d.Name {
			t.Errorf("lookup %s: %v", d.Name, err)
		}
	}
	if e, err := Lookup("postgresql"); err != nil || e.Name != "postgres" {
		t.Errorf("postgresql: %v %v", e.Name, err)
	}
	pg, maria := engine.TraitsOf("postgres"), engine.TraitsOf("mariadb")
	if pg.CleanStop != syscall.SIGINT || pg.FastStop != syscall.SIGQUIT || maria.CleanStop != syscall.SIGTERM || maria.FastStop != syscall.SIGKILL {
		t.Errorf("stop signals: %+v %+v", pg, maria)
	}
	for banner, want := range map[string]string{
		"postgres (PostgreSQL) 15.18 (Debian 15.18-1.pgdg120+1)":        "15.18",
		"/usr/sbin/mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian": "10.11.19",
		"15.18": "15.18",
	} {
		if got := engine.ShortVersion(banner); got != want {
			t.Errorf("ShortVersion(%q) = %q", banner, got)
		}
	}
	p, _ := Lookup("postgres")
	m, _ := Lookup("mariadb")
	if p.Major("15.14") != "15" || m.Major("10.11.6") != "10.11" || p.Oldest != "11" || m.Oldest != "" {
		t.Error("major versions")
	}
	if !p.Slots || m.Slots || !reflect.DeepEqual(p.BuildLeftovers, []string{"postmaster.opts"}) || m.BuildLeftovers != nil {
		t.Error("slots and build leftovers")
	}
	env := map[string]string{"PGHOST": "/run/x", "PGPORT": "5", "MYSQL_UNIX_PORT": "/run/y/s", "MYSQL_HOST": "127.0.0.1"}
	engine.TCPOnly(env)
	if !reflect.DeepEqual(env, map[string]string{"PGHOST": "127.0.0.1", "PGPORT": "5", "MYSQL_HOST": "127.0.0.1"}) {
		t.Errorf("tcp only: %v", env)
	}
	for k, want := range map[string]bool{"PGPASSWORD": true, "MYSQL_PWD": true, "DATABASE_URL": false, "HOME": false} {
		if engine.ClientVar(k) != want {
			t.Errorf("client variable %s: %v", k, !want)
		}
	}
}

// What a recipe names is checked where its engine is opened: the same
// one-line errors the recipe parser gave.
func TestRecipeChoices(t *testing.T) {
	_, err := Open(context.Background(), engine.Want{Engine: "oracle", Recipe: "dbfork.toml"})
	if !errors.Is(err, errs.ErrInvalid) || err.Error() != `dbfork.toml: unknown engine "oracle" (use "postgres", "mariadb" or "mysql")` {
		t.Errorf("unknown engine: %v", err)
	}
	err = engine.CheckSlots("mariadb", "dbfork.toml", 4)
	if !errors.Is(err, errs.ErrInvalid) || err.Error() != `dbfork.toml: [fresh] slots works with engine = "postgres" only (a mariadb database cannot be copied as files); remove it, leases reset in place instead` {
		t.Errorf("slots on mariadb: %v", err)
	}
	if err := engine.CheckSlots("postgres", "dbfork.toml", 4); err != nil {
		t.Errorf("slots on postgres: %v", err)
	}
}
