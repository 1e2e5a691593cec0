package recipe

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

func writeFiles(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParseFullRecipe(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"dbfork.toml": `
engine = "postgres"
version = "15"
database = "shop"
owner = "shop_owner"
freeze = false

[settings]
work_mem = "8MB"
max_connections = 200

[[load]]
sql = ["schema.sql", "seed/*.sql"]

[[load]]
dump = "dumps/master.dump"

[[load]]
name = "migrate"
run = "migrate up"
inputs = ["migrations"]

[pool]
min = 1
max = 4
hot = ["items", "public.orders"]
`,
		"schema.sql": "create table t(a int);", "seed/02.sql": "b", "seed/01.sql": "a",
		"dumps/master.dump": "PGDMP", "migrations/2_b.sql": "x", "migrations/1_a.sql": "y",
	})
	r, err := Load(filepath.Join(dir, "dbfork.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Engine != "postgres" || r.Version != "15" || r.Database != "shop" || r.Owner != "shop_owner" || r.Freeze {
		t.Fatalf("fields: %+v", r)
	}
	if r.Settings["work_mem"] != "8MB" || r.Settings["max_connections"] != "200" {
		t.Fatalf("settings: %v", r.Settings)
	}
	if len(r.Steps) != 3 {
		t.Fatalf("steps: %d", len(r.Steps))
	}
	var rels []string
	for _, f := range r.Steps[0].Files {
		rels = append(rels, r.Rel(f))
	}
	if got := strings.Join(rels, ","); got != "schema.sql,seed/01.sql,seed/02.sql" {
		t.Fatalf("sql files in load order: %s", got)
	}
	if r.Steps[1].Kind != StepDump || r.Steps[2].Kind != StepRun || r.Steps[2].Name != "migrate" {
		t.Fatalf("kinds: %+v", r.Steps)
	}
	if len(r.Steps[2].Files) != 2 || !strings.HasSuffix(r.Steps[2].Files[0], "1_a.sql") {
		t.Fatalf("a directory input expands to its files, sorted: %v", r.Steps[2].Files)
	}
	if r.Pool.Min != 1 || r.Pool.Max != 4 || !r.Pool.MaxSet || !r.Pool.Prewarm || strings.Join(r.Pool.Hot, ",") != "items,public.orders" {
		t.Fatalf("pool: %+v", r.Pool)
	}
}

func TestDefaults(t *testing.T) {
	r, err := Parse("/x/dbfork.toml", []byte(`engine = "postgresql"`))
	if err != nil {
		t.Fatal(err)
	}
	// The alias is the engine registry's to resolve (engines.Open).
	if r.Engine != "postgresql" || r.Database != "app" || r.Owner != "app" || !r.Freeze || r.Locale != "C" || r.Pool.Max != 8 || !r.Pool.Prewarm {
		t.Fatalf("defaults: %+v", r)
	}
	r, err = Parse("/x/dbfork.toml", []byte("engine = \"postgres\"\n[pool]\nprewarm = false\n"))
	if err != nil || r.Pool.Prewarm || r.Pool.Min != 2 || r.Pool.Ahead != -1 || r.Pool.MaxSet {
		t.Fatalf("prewarm = false: %+v %v", r.Pool, err)
	}
	r, err = Parse("/x/dbfork.toml", []byte("engine = \"postgres\"\n[pool]\nahead = 0\n"))
	if err != nil || r.Pool.Ahead != 0 {
		t.Fatalf("ahead = 0: %+v %v", r.Pool, err)
	}
}

func TestBadRecipes(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.sql": "select 1;"})
	cases := []struct {
		name, text, want string
		kind             error
	}{
		{"syntax", "engine = \"postgres\"\ndatabase = \n", "dbfork.toml:2: syntax error", errs.ErrInvalid},
		{"unknown key", "engine = \"postgres\"\ndatbase = \"x\"\n", `unknown key "datbase"`, errs.ErrInvalid},
		{"unknown step key", "engine = \"postgres\"\n[[load]]\nsql = \"a.sql\"\nfile = \"x\"\n", `unknown key "load.file"`, errs.ErrInvalid},
		{"no engine", "database = \"x\"\n", "engine is missing", errs.ErrInvalid},
		{"bad engine", "engine = \"my sql\"\n", `engine "my sql" is not an engine name`, errs.ErrInvalid},
		{"missing file", "engine = \"postgres\"\n[[load]]\nsql = \"nope.sql\"\n", "load[1]: file " + dir + "/nope.sql not found", errs.ErrInvalid},
		{"empty glob", "engine = \"postgres\"\n[[load]]\nsql = \"seed/*.sql\"\n", `no file matches "seed/*.sql"`, errs.ErrInvalid},
		{"two kinds", "engine = \"postgres\"\n[[load]]\nsql = \"a.sql\"\nrun = \"x\"\n", "needs exactly one of sql, dump or run", errs.ErrInvalid},
		{"no kind", "engine = \"postgres\"\n[[load]]\nname = \"x\"\n", "needs exactly one of", errs.ErrInvalid},
		{"inputs on sql", "engine = \"postgres\"\n[[load]]\nsql = \"a.sql\"\ninputs = [\"a.sql\"]\n", "inputs only belongs to run steps", errs.ErrInvalid},
		{"bad database", "engine = \"postgres\"\ndatabase = \"a; drop\"\n", "must be a plain identifier", errs.ErrInvalid},
		{"wrong type", "engine = \"postgres\"\ndatabase = 5\n", "database", errs.ErrInvalid},
		{"bad sql type", "engine = \"postgres\"\n[[load]]\nsql = 5\n", "expected a string or a list of strings", errs.ErrInvalid},
		{"bad version", "engine = \"postgres\"\nversion = \"latest\"\n", "is not a version number", errs.ErrInvalid},
		{"bad pool", "engine = \"postgres\"\n[pool]\nmin = 5\nmax = 2\n", "pool needs", errs.ErrInvalid},
		{"negative ahead", "engine = \"postgres\"\n[pool]\nahead = -2\n", "[pool] ahead = -2", errs.ErrInvalid},
		{"huge ahead", "engine = \"postgres\"\n[pool]\nahead = 1000\n", "ahead must be", errs.ErrInvalid},
		{"bad hot table", "engine = \"postgres\"\n[pool]\nhot = [\"../etc/passwd\"]\n", "not a table name", errs.ErrInvalid},
		{"hot not strings", "engine = \"postgres\"\n[pool]\nhot = [1]\n", "list of strings", errs.ErrInvalid},
		{"bad setting name", "engine = \"postgres\"\n[settings]\n\"a b\" = 1\n", "not a server setting name", errs.ErrInvalid},
		{"newline in setting", "engine = \"postgres\"\n[settings]\nwork_mem = \"1\\n2\"\n", "holds a newline", errs.ErrInvalid},
		{"two dump files", "engine = \"postgres\"\n[[load]]\ndump = \"*.sql\"\n", "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(filepath.Join(dir, "dbfork.toml"), []byte(c.text))
			if c.kind == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.kind) {
				t.Fatalf("got %q, want it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

func TestMissingRecipeFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "dbfork.toml"))
	if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("got %v", err)
	}
}

// FuzzParse: no input may panic or produce an error that spans lines.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"engine = \"postgres\"\n",
		"engine = \"postgres\"\n[[load]]\nsql = [\"a.sql\"]\n",
		"engine = \"mariadb\"\n[settings]\nx = 1\n[pool]\nmin = 1\n",
		"[[load]]\nrun = \"x\"\ninputs = \"y\"\n",
		"engine = 'postgres'\ndatabase = \"\"\"\nx\"\"\"\n",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		_, err := Parse(filepath.Join(dir, "dbfork.toml"), []byte(text))
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error for %q: %q", text, err)
		}
	})
}
