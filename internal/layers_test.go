package internal_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/dbfork/dbfork"

// The layer list in docs/architecture.md is the rule, not a picture of
// it: every package's own (non-test) imports are checked against it, so
// an arrow that runs back up (engine importing the store, golden
// importing instance, anything importing cli) fails here.
func TestImportsFollowTheLayers(t *testing.T) {
	layers, err := readLayers("../docs/architecture.md", "..")
	if err != nil {
		t.Fatal(err)
	}
	imports, err := moduleImports("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sortedKeys(layers) {
		if _, ok := imports[p]; !ok {
			t.Errorf("docs/architecture.md lists %s, which is not a package of this module", p)
		}
	}
	for _, v := range layerViolations(layers, imports) {
		t.Error(v)
	}
}

// The check itself, on a made-up graph: each kind of wrong arrow is
// named, and a graph that keeps to its layers passes.
func TestLayerViolations(t *testing.T) {
	layers := map[string]int{"internal/cli": 0, "internal/golden": 1, "internal/instance": 1, "internal/engine": 2, "internal/store": 2, "internal/errs": 3}
	good := map[string][]string{
		"internal/cli":       {"internal/golden", "internal/errs"},
		"internal/golden":    {"internal/engine", "internal/store"},
		"internal/engine":    {"internal/errs"},
		"internal/clihelper": {"internal/cli"}, // unlisted: a leaf, may import anything
	}
	if v := layerViolations(layers, good); len(v) != 0 {
		t.Errorf("a layered graph is refused: %v", v)
	}
	for _, bad := range []map[string][]string{
		{"internal/engine": {"internal/golden"}},   // up
		{"internal/engine": {"internal/store"}},    // sideways
		{"internal/errs": {"internal/cli"}},        // to the top
		{"internal/golden": {"internal/instance"}}, // sideways
		{"internal/engine": {"internal/newpkg"}},   // to a package the list does not place
	} {
		if v := layerViolations(layers, bad); len(v) != 1 {
			t.Errorf("%v: want one violation, got %v", bad, v)
		}
	}
}

// layerViolations lists each import of a listed package that is not on
// a line below its own.
func layerViolations(layers map[string]int, imports map[string][]string) []string {
	var out []string
	for _, p := range sortedKeys(imports) {
		from, listed := layers[p]
		if !listed {
			continue // outside the layers (small mains, test helpers): a leaf
		}
		for _, q := range imports[p] {
			to, ok := layers[q]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s imports %s, which the layer list in docs/architecture.md does not place", p, q))
			case to <= from:
				out = append(out, fmt.Sprintf("%s imports %s, which is on the same line or above it in docs/architecture.md", p, q))
			}
		}
	}
	return out
}

// readLayers parses the first code block after "## Layers": one line per
// layer, top first: comma-separated package paths, then what the layer
// is (after the last path's space); a bare name meaning a sibling of the line's first
// path when that directory exists (internal/engine/postgres, mysql).
func readLayers(doc, root string) (map[string]int, error) {
	f, err := os.Open(doc)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	layers := map[string]int{}
	line, section, inBlock := 0, false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := sc.Text()
		switch {
		case strings.HasPrefix(text, "## "):
			section = text == "## Layers"
		case section && strings.HasPrefix(text, "```"):
			if inBlock {
				return layers, nil
			}
			inBlock = true
		case inBlock && strings.TrimSpace(text) != "":
			var first string
			for i, field := range strings.Split(text, ",") {
				words := strings.Fields(field)
				n := words[0]
				if i == 0 {
					first = n
				} else if !strings.Contains(n, "/") {
					if fi, err := os.Stat(filepath.Join(root, path.Dir(first), n)); err == nil && fi.IsDir() {
						n = path.Join(path.Dir(first), n)
					}
				}
				if _, dup := layers[n]; dup {
					return nil, fmt.Errorf("%s: %s is listed twice", doc, n)
				}
				layers[n] = line
				if len(words) > 1 {
					break // the rest of the line says what the layer is
				}
			}
			line++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%s: no code block under ## Layers", doc)
}

// moduleImports maps each package of the module (by path inside it) to
// the module's packages its non-test files import.
func moduleImports(root string) (map[string][]string, error) {
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		pkg, err := build.Default.ImportDir(p, 0)
		if err != nil {
			var none *build.NoGoError
			if errors.As(err, &none) {
				return nil
			}
			return fmt.Errorf("%s: %w", p, err)
		}
		rel, _ := filepath.Rel(root, p)
		var deps []string
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module+"/") {
				deps = append(deps, strings.TrimPrefix(imp, module+"/"))
			}
		}
		out[filepath.ToSlash(rel)] = deps
		return nil
	})
	return out, err
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
