package golden

import (
	"encoding/json"
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
	pieces := []string{"base", "16384", "pg_wal", "ä", "日本", "\"", "\\", "\x01", "\t", "/", "\u2028", "\xff", "<&>", " ", "x.1"}
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
	for i := 0; i < n; i++ {
		f := File{Path: name(), Size: rng.Int63n(1 << 40), Mode: uint32(rng.Int63n(1 << 32))}
		switch rng.Intn(3) {
		case 0:
			f.SHA256 = strings.Repeat("f", 64)
		case 1:
			f.Link = name()
		}
		m.Files = append(m.Files, f)
	}
	return m
}

// decodeManifest reads what encoding/json wrote exactly as encoding/json
// reads it, indented or not, whatever the names hold.
func TestDecodeManifestAgreesWithEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		m := randomManifest(rng, rng.Intn(50))
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
			if want.Files == nil {
				want.Files = []File{}
			}
			if got.Files == nil {
				got.Files = []File{}
			}
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("manifest %d (indent %v) decodes differently:\n got %+v\nwant %+v", i, indent, *got, want)
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
		m, err := decodeManifest([]byte(c.in))
		var want Manifest
		jerr := json.Unmarshal([]byte(c.in), &want)
		if (err != nil) != c.bad || (jerr != nil) != c.bad {
			t.Errorf("%q: error %v (encoding/json: %v), want error %v", c.in, err, jerr, c.bad)
			continue
		}
		if err == nil && (len(m.Files) != c.files || !reflect.DeepEqual(m.Files, want.Files) && len(want.Files) > 0) {
			t.Errorf("%q: files %+v, encoding/json %+v", c.in, m.Files, want.Files)
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
		for i := range m.Files { // names like a data dir's
			m.Files[i].Path = "base/16384/" + strings.Repeat("1", 5)
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
	b.Run("decodeManifest", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := decodeManifest(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
