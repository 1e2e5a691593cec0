package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

func file(path string, size int64, sum string) golden.File {
	return golden.File{Path: path, Size: size, Mode: 0o600, SHA256: sum}
}

// Big files are layers of their own, split at MaxLayer; small ones are
// grouped, and growing one small file leaves the other groups alone.
func TestPlanLayers(t *testing.T) {
	var files []golden.File
	for i := range 400 {
		files = append(files, file(fmt.Sprintf("base/1/%d", 1000+i), 8192, fmt.Sprintf("sum%d", i)))
	}
	files = append(files, file("base/1/huge", 2*MaxLayer+5, "h"), file("base/1/big", 64<<20, "b"),
		golden.File{Path: "base", Mode: uint32(os.ModeDir | 0o700)})
	plans := planLayers(files, 0)
	var chunks, groups int
	seen := map[string]int64{}
	for _, p := range plans {
		if p.Bytes > MaxLayer {
			t.Errorf("layer of %d bytes, more than %d", p.Bytes, MaxLayer)
		}
		for _, pc := range p.Pieces {
			seen[pc.File.Path] += pc.Length
		}
		if len(p.Pieces) == 1 && p.Pieces[0].File.Size >= DefaultLargeFile {
			chunks++
		} else {
			groups++
		}
	}
	if chunks != 4 { // huge in 3, big in 1
		t.Errorf("%d large-file layers, want 4", chunks)
	}
	if groups < 4 || groups > 40 {
		t.Errorf("400 small files in %d groups, want a handful", groups)
	}
	for _, f := range files {
		if f.Mode&uint32(os.ModeDir) == 0 && seen[f.Path] != f.Size {
			t.Errorf("%s: %d bytes in layers, want %d", f.Path, seen[f.Path], f.Size)
		}
	}
	// One small file changes size: only its group's plan changes.
	changed := append([]golden.File(nil), files...)
	changed[123] = file(changed[123].Path, 3*8192, "z")
	ids := map[string]bool{}
	for _, p := range plans {
		ids[p.id()] = true
	}
	var differ int
	for _, p := range planLayers(changed, 0) {
		if !ids[p.id()] {
			differ++
		}
	}
	if differ != 1 {
		t.Errorf("%d layers differ after one small file changed, want 1", differ)
	}
	// A file with the content of an earlier one travels once.
	dup := append([]golden.File(nil), files...)
	dup = append(dup, file("base/2/1000", 8192, "sum0"), file("base/2/empty", 0, ""))
	for _, p := range planLayers(dup, 0) {
		for _, pc := range p.Pieces {
			if pc.File.Path == "base/2/1000" {
				t.Errorf("a copy of base/1/1000 is in a layer")
			}
		}
	}
}

// A layer's bytes depend on its content only.
func TestLayerDeterministic(t *testing.T) {
	dir := t.TempDir()
	var files []golden.File
	for i, body := range []string{"alpha", "beta", "", "gamma gamma gamma"} {
		name := fmt.Sprintf("f%d", i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		files = append(files, file(name, int64(len(body)), "x"))
	}
	plans := planLayers(files, 4)
	var first []string
	for round := range 2 {
		for i, p := range plans {
			var buf bytes.Buffer
			desc, err := writeLayer(context.Background(), dir, p, &buf)
			if err != nil {
				t.Fatal(err)
			}
			if int64(buf.Len()) != desc.Size {
				t.Fatalf("descriptor size %d, wrote %d", desc.Size, buf.Len())
			}
			if round == 0 {
				first = append(first, desc.Digest.String())
				// Touching a file's mtime changes nothing.
				_ = os.Chtimes(filepath.Join(dir, p.Pieces[0].File.Path), epoch, epoch.Add(1e9))
			} else if desc.Digest.String() != first[i] {
				t.Errorf("layer %d: digest %s then %s", i, first[i], desc.Digest)
			}
		}
	}
}

// Paths that could leave the data dir are refused before anything is written.
func TestCheckFilesRefusesEscapes(t *testing.T) {
	dir := golden.File{Path: "a", Mode: uint32(os.ModeDir | 0o700)}
	link := golden.File{Path: "l", Mode: uint32(os.ModeSymlink | 0o777), Link: "/etc"}
	for name, files := range map[string][]golden.File{
		"dotdot":         {file("../x", 1, "s")},
		"absolute":       {file("/etc/passwd", 1, "s")},
		"unclean":        {dir, file("a/../../x", 1, "s")},
		"through link":   {link, file("l/passwd", 1, "s")},
		"missing parent": {file("b/c", 1, "s")},
		"device":         {{Path: "d", Mode: uint32(os.ModeDevice | 0o600)}},
	} {
		if err := checkFiles(files); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := checkFiles([]golden.File{dir, file("a/b", 1, "s"), link}); err != nil {
		t.Errorf("good manifest refused: %v", err)
	}
}

// Scratch dirs of killed pushes go; a live push's stays.
func TestReapPushDirs(t *testing.T) {
	s, err := store.Open(filepath.Join(testenv.Dir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(s.CacheDir(), "oci-push-999999999-abc")
	live, err := newPushDir(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dead, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := ReapPushDirs(s)
	if len(got) != 1 || got[0] != dead {
		t.Fatalf("reaped %v, want [%s]", got, dead)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("live push dir removed: %v", err)
	}
}
