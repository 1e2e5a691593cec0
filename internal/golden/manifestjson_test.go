package golden

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// randomManifest is a manifest whose names use every kind of character
// JSON escapes or encodes (quotes, backslashes, control bytes, non-ASCII,
// bytes that are not UTF-8).
func randomManifest(rng *rand.Rand, n int) *Manifest {
	pieces := []string{"base", "16384", "pg_wal", "ä", "日本", "\"", "\\", "\x01", "\t", "/", "\u2028", "\xff", "<&>", " ", "x.1", "},\n {", "]"}
	name := func() string {
		var b strings.Builder
		for k := rng.Intn(5) + 1; k > 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		return b.String()
	}
	m := &Manifest{Format: 3, Key: strings.Repeat("ab", 32), Engine: "postgres", EngineVersion: "postgres (PostgreSQL) 18.6",
		InitOptions: map[string]string{"locale": "C", name(): name()}, Recipe: "/p/" + name() + "/dbfork.toml",
		Database: "shop", Owner: "shop", Inputs: []Input{{Path: name(), SHA256: strings.Repeat("0", 64)}},
		Created: time.Unix(1790000000, 123456789).UTC(), BuildSeconds: 1.5, TotalBytes: 1 << 40, DiskBytes: 12345,
		Slots: []string{"slot_000"}, StepKeys: []string{"k"}, Intermediate: &StepState{Step: 1, Steps: 2}}
	var files []File
	for i := 0; i < n; i++ {
		f := File{Path: name(), Size: rng.Int63n(1 << 40), Mode: uint32(rng.Int63n(1 << 32))}
		switch rng.Intn(3) {
		case 0:
			f.SHA256 = strings.Repeat("f", 64)
		case 1:
			f.Link = name()
		}
		files = append(files, f)
	}
	m.SetFiles(files)
	return m
}

// filesOf is m's file list (the test fails when it cannot be read).
func filesOf(t testing.TB, m *Manifest) []File {
	t.Helper()
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// sameManifest fails unless got and want say the same, file lists
// included (nil and empty alike).
func sameManifest(t *testing.T, what string, got, want *Manifest) {
	t.Helper()
	gf, wf := filesOf(t, got), filesOf(t, want)
	if len(gf) == 0 && len(wf) == 0 {
		gf, wf = nil, nil
	}
	g, w := *got, *want
	g.SetFiles(nil)
	w.SetFiles(nil)
	if !reflect.DeepEqual(g, w) || !reflect.DeepEqual(gf, wf) {
		t.Fatalf("%s decodes differently:\n got %+v %+v\nwant %+v %+v", what, g, gf, w, wf)
	}
}

// decodeManifest reads what encoding/json wrote exactly as encoding/json
// reads it, indented or not, whatever the names hold.
func TestDecodeManifestAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		n := rng.Intn(50)
		if i%20 == 0 {
			n = 3000 // a long list, the size of a slot golden's
		}
		m := randomManifest(rng, n)
		for _, indent := range []bool{true, false} {
			var data []byte
			var err error
			if indent {
				data, err = json.MarshalIndent(m, "", "  ")
			} else {
				data, err = json.Marshal(m)
			}
			if err != nil {
				t.Fatal(err)
			}
			var want Manifest
			if err := json.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			got, err := decodeManifest(data)
			if err != nil {
				t.Fatalf("manifest %d: %v", i, err)
			}
			sameManifest(t, fmt.Sprintf("manifest %d (indent %v)", i, indent), got, &want)
			// What the check reads without some dirs is the list
			// without them.
			all := filesOf(t, &want)
			skip := map[string]bool{}
			for _, f := range all {
				if d := topDirs(f.Path, 2); len(d) < len(f.Path) && rng.Intn(2) == 0 {
					skip[d] = true
				}
			}
			again, err := decodeManifest(data)
			if err != nil {
				t.Fatal(err)
			}
			part, err := again.filesWithout(skip)
			if err != nil {
				t.Fatal(err)
			}
			var kept []File
			for _, f := range all {
				if !below(f.Path, skip) {
					kept = append(kept, f)
				}
			}
			if len(part) != len(kept) || len(kept) > 0 && !reflect.DeepEqual(part, kept) {
				t.Fatalf("manifest %d without %d dirs: %d files, want %d", i, len(skip), len(part), len(kept))
			}
		}
	}
}

// What it does not expect goes to encoding/json, whose answer (or error)
// it returns.
func TestDecodeManifestOddInput(t *testing.T) {
	for _, c := range []struct {
		in    string
		files int
		bad   bool
	}{
		{`{"files": null}`, 0, false},
		{`{"files": [{"path": "a", "size": 1e3}]}`, 0, true},
		{`{"files": [{"path": "a", "extra": {"x": [1, "]"]}, "size": 2}], "future": [1, {"a": "}"}]}`, 1, false},
		{`{"key": "k", "files": [{"path": "a"}], "files": [{"path": "b"}, {"path": "c"}]}`, 2, false},
		{`{"files": [{"path": "a", "size": -1}]}`, 1, false},
		{`{"fil\u0065s": [{"p\u0061th": "a\u00e4", "s\u0069ze": 7}]}`, 1, false},
		{`{"files": [{"path": "a", "mode": -1}]}`, 0, true},
		{`{"files": [{"path": "a"`, 0, true},
		{`{"files": [{"path": "a"}]} trailing`, 0, true},
		{`{"files": [{"path": "a\x01"}]}`, 0, true},
		{``, 0, true},
	} {
		// The list is decoded when first asked for: a bad one is an
		// error then.
		var files []File
		m, err := decodeManifest([]byte(c.in))
		if err == nil {
			files, err = m.Files()
		}
		var want Manifest
		jerr := json.Unmarshal([]byte(c.in), &want)
		if (err != nil) != c.bad || (jerr != nil) != c.bad {
			t.Errorf("%q: error %v (encoding/json: %v), want error %v", c.in, err, jerr, c.bad)
			continue
		}
		if err == nil && (len(files) != c.files || !reflect.DeepEqual(files, filesOf(t, &want)) && c.files > 0) {
			t.Errorf("%q: files %+v, encoding/json %+v", c.in, files, filesOf(t, &want))
		}
	}
}

// A real slot golden's manifest, when the bench store has one
// (DBFORK_BENCH_MANIFEST): go test -bench DecodeManifest -run XXX.
func BenchmarkDecodeManifest(b *testing.B) {
	path := os.Getenv("DBFORK_BENCH_MANIFEST")
	var data []byte
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			b.Fatal(err)
		}
	} else {
		m := randomManifest(rand.New(rand.NewSource(2)), 11000)
		for i, f := range filesOf(b, m) { // names like a data dir's
			f.Path = "base/16384/" + strings.Repeat("1", 5)
			filesOf(b, m)[i] = f
		}
		data, _ = json.MarshalIndent(m, "", "  ")
	}
	b.SetBytes(int64(len(data)))
	b.Run("encoding-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var m Manifest
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decodeManifest", func(b *testing.B) { // what a lookup costs
		for i := 0; i < b.N; i++ {
			if _, err := decodeManifest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("files", func(b *testing.B) { // and the whole list
		for i := 0; i < b.N; i++ {
			m, err := decodeManifest(data)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := m.Files(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("without-slots", func(b *testing.B) { // the list a closed-slot check reads
		for i := 0; i < b.N; i++ {
			m, err := decodeManifest(data)
			if err != nil {
				b.Fatal(err)
			}
			skip := map[string]bool{}
			for _, d := range m.SlotDirs {
				skip[d] = true
			}
			if _, err := m.filesWithout(skip); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A manifest with slots as this version writes it: its file list last,
// the slots' files at its end. It is found without being read, the check
// that leaves the slots out reads only the others, and a list that does
// not end where it should is an error when it is read.
func TestManifestSlotFilesLast(t *testing.T) {
	var files []File
	for _, dir := range []string{"base/16384", "base/16390", "base/16391", "global"} {
		for i := 0; i < 300; i++ {
			files = append(files, File{Path: fmt.Sprintf("%s/%d", dir, 1000+i), Size: 8192, Mode: 0o600, SHA256: strings.Repeat("e", 64)})
		}
	}
	slotDirs := []string{"base/16390", "base/16391"}
	m := &Manifest{Key: strings.Repeat("cd", 32), Engine: "postgres", Slots: SlotNames(2), SlotDirs: slotDirs}
	m.SetFiles(slotFilesLast(files, slotDirs))
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.list == nil || !got.list.slotsLast {
		t.Fatalf("the list of a manifest written with slot_dirs first was not taken as slots-last: %+v", got.list)
	}
	var want Manifest
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	sameManifest(t, "slots-last manifest", got, &want)
	again, _ := decodeManifest(data)
	skip := map[string]bool{"base/16390": true, "base/16391": true}
	part, err := again.filesWithout(skip)
	if err != nil || len(part) != 600 || part[0].Path != "base/16384/1000" || part[599].Path != "global/1299" {
		t.Fatalf("without the slots: %d files (%v), want the 600 outside them", len(part), err)
	}
	// Something after the list: the list is taken to end at the last
	// "]", which is not where it ends; reading it says so.
	bad := append(append([]byte(nil), data[:len(data)-2]...), `, "later": []}`...)
	m2, err := decodeManifest(bad)
	if err != nil {
		t.Fatalf("header of a manifest with a key after its list: %v", err)
	}
	if _, err := m2.Files(); err == nil {
		t.Fatal("a list that does not end where it was taken to end was read as a list")
	}
}
