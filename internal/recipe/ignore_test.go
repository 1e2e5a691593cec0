package recipe

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestInputDirsSkipByProducts(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"migrations/0001_init.py":                          "a",
		"migrations/0002_more.py":                          "b",
		"migrations/__pycache__/0001_init.cpython-311.pyc": "x",
		"migrations/.0002_more.py.swp":                     "x",
		"migrations/notes.bak":                             "x",
		"migrations/keep.bak":                              "k",
		"migrations/build/out.txt":                         "x",
		"seed/a.sql":                                       "s",
		"seed/b.pyc":                                       "x",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ignore := "# by-products\n*.bak\n!keep.bak\n/migrations/build/\n"
	if err := os.WriteFile(filepath.Join(dir, IgnoreFile), []byte(ignore), 0o644); err != nil {
		t.Fatal(err)
	}
	recipe := `engine = "postgres"
[[load]]
sql = "seed/*"
[[load]]
run = "true"
inputs = ["migrations"]
`
	r, err := Parse(filepath.Join(dir, DefaultFile), []byte(recipe))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range r.Steps {
		for _, f := range st.Files {
			rel, _ := filepath.Rel(dir, f)
			got = append(got, rel)
		}
	}
	want := []string{"seed/a.sql", "migrations/0001_init.py", "migrations/0002_more.py", "migrations/keep.bak"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("inputs %q, want %q", got, want)
	}
	// Named explicitly, a file is an input whatever the rules say.
	r, err = Parse(filepath.Join(dir, DefaultFile), []byte("engine = \"postgres\"\n[[load]]\nsql = \"seed/b.pyc\"\n"))
	if err != nil || len(r.Steps[0].Files) != 1 {
		t.Fatalf("an explicitly named file was dropped: %v %v", err, r)
	}
}

func TestIgnorePatterns(t *testing.T) {
	rs := parseIgnore("**/tmp/**\nlogs/\n/top.txt\n*.o\n!main.o\n")
	for _, c := range []struct {
		path string
		dir  bool
		want bool
	}{
		{"a/tmp/x", false, true}, {"tmp/y/z", false, true}, {"logs", true, true}, {"logs", false, false},
		{"top.txt", false, true}, {"sub/top.txt", false, false}, {"x/y.o", false, true}, {"main.o", false, false},
		{"a/b.sql", false, false},
	} {
		if got := rs.ignored(c.path, c.dir); got != c.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", c.path, c.dir, got, c.want)
		}
	}
}
