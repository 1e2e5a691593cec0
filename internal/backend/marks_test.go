package backend_test

import (
	"encoding/gob"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/dbfork/dbfork/internal/backend"
)

// Marks come back as saved; a file from the gob format earlier releases
// wrote still loads; a damaged one is refused, not half read.
func TestMarksFile(t *testing.T) {
	dir := t.TempDir()
	m := &backend.Marks{Files: map[string]backend.Mark{
		"base/5/1259":            {Ino: 1 << 40, Size: 8192, Ctime: 1795686437302451297},
		"global/pg_filenode.map": {Ino: 7, Size: 0, Ctime: -1},
		"odd name\n\u00e9":       {Ino: 0, Size: -5, Ctime: 42},
	}}
	path := filepath.Join(dir, "marks")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := backend.LoadMarks(path)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, m)
	}
	empty := &backend.Marks{Files: map[string]backend.Mark{}}
	if err := empty.Save(path); err != nil {
		t.Fatal(err)
	}
	if got, err := backend.LoadMarks(path); err != nil || len(got.Files) != 0 {
		t.Fatalf("empty marks loaded as %+v, %v", got, err)
	}

	legacy := filepath.Join(dir, "legacy")
	f, err := os.Create(legacy)
	if err != nil {
		t.Fatal(err)
	}
	if err := gob.NewEncoder(f).Encode(m); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := backend.LoadMarks(legacy); err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("gob marks loaded as %+v, %v", got, err)
	}

	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int{len(data) - 1, len(data) / 2, 16} {
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := backend.LoadMarks(path); err == nil {
			t.Errorf("marks cut to %d of %d bytes loaded: %+v", cut, len(data), got)
		}
	}
	if err := os.WriteFile(path, append(append([]byte{}, data...), 0), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.LoadMarks(path); err == nil {
		t.Error("marks with a trailing byte loaded")
	}
}
