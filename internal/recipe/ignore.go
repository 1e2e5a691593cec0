package recipe

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// IgnoreFile lists, in gitignore syntax, files below input directories
// that are not part of the key (relative to the recipe dir).
const IgnoreFile = ".dbforkignore"

// DefaultIgnores are by-products nobody edits: a run step that imports
// Python migrations writes __pycache__ into the very directory that is
// its input, and the next run would see new inputs and build again.
var DefaultIgnores = []string{
	"__pycache__/", "*.pyc", "*.pyo", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/",
	"node_modules/.cache/", ".git/", ".hg/", ".svn/",
	"*.swp", "*.swo", "*~", ".#*", "#*#", ".DS_Store",
}

// ignoreRule is one gitignore line.
type ignoreRule struct {
	re      *regexp.Regexp
	negate  bool
	dirOnly bool
}

// ignoreRules decide which files below input dirs are skipped; the last
// rule that matches a path wins, as in git.
type ignoreRules []ignoreRule

// loadIgnores reads the default rules, then STORE/.dbforkignore, then,
// when the recipe asks for it, the recipe dir's .gitignore.
func loadIgnores(dir string, gitignore bool) (ignoreRules, error) {
	rules := parseIgnore(strings.Join(DefaultIgnores, "\n"))
	names := []string{IgnoreFile}
	if gitignore {
		names = append(names, ".gitignore")
	}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rules = append(rules, parseIgnore(string(data))...)
	}
	return rules, nil
}

func parseIgnore(text string) ignoreRules {
	var out ignoreRules
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var r ignoreRule
		if strings.HasPrefix(line, "!") {
			r.negate, line = true, line[1:]
		}
		line = strings.TrimPrefix(line, `\`)
		if strings.HasSuffix(line, "/") {
			r.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		anchored := strings.Contains(line, "/")
		line = strings.TrimPrefix(line, "/")
		if line == "" {
			continue
		}
		expr := globToRegexp(line)
		if anchored {
			expr = "^" + expr + "$"
		} else {
			expr = "(^|/)" + expr + "$"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			continue // a line git would not understand either
		}
		r.re = re
		out = append(out, r)
	}
	return out
}

// globToRegexp turns a gitignore glob into a regexp: ** spans dirs, * and
// ? stay within one name, [...] is a class.
func globToRegexp(g string) string {
	var b bytes.Buffer
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case strings.HasPrefix(g[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(g[i:], "/**") && i+3 == len(g):
			b.WriteString("/.*")
			i += 2
		case strings.HasPrefix(g[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			j := strings.IndexByte(g[i:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := g[i+1 : i+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// ignored reports whether rel (slash-separated, relative to the recipe
// dir) is skipped.
func (rs ignoreRules) ignored(rel string, isDir bool) bool {
	out := false
	for _, r := range rs {
		if r.dirOnly && !isDir {
			continue
		}
		if r.re.MatchString(rel) {
			out = !r.negate
		}
	}
	return out
}

// skip is ignored for an absolute path below the recipe dir; paths
// outside it are matched by their own name only.
func (r *Recipe) skip(p string, isDir bool) bool {
	rel, err := filepath.Rel(r.Dir, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = filepath.Base(p)
	}
	return r.ignores.ignored(filepath.ToSlash(rel), isDir)
}
