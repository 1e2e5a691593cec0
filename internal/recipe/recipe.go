// Package recipe reads dbfork.toml: which engine, which database, and the
// ordered load steps whose inputs make up a golden's key.
package recipe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/dbfork/dbfork/internal/errs"
)

// DefaultFile is the recipe file name looked up when -f is not given.
const DefaultFile = "dbfork.toml"

// Recipe is a parsed, validated dbfork.toml with every input file resolved.
type Recipe struct {
	Path    string // absolute path of the recipe file
	Dir     string // directory relative paths are resolved against
	Engine  string
	Version string // wanted major version ("15"); empty: whatever is found
	Bindir  string // where the server binaries are; empty: search
	// NoFetch forbids fetching a server build into the engine cache
	// (fetch = false): only installed or already cached servers count.
	NoFetch  bool
	Database string
	Owner    string
	Locale   string
	Encoding string
	Freeze   bool              // VACUUM FREEZE ANALYZE / OPTIMIZE at the end of a build
	Settings map[string]string // server settings for instances (not part of the key)
	Steps    []Step
	Pool     Pool
	Fresh    Fresh // [fresh]: slots built into the golden (part of the key)
	Cache    Cache // registries the golden is pulled from / pushed to (not part of the key)
	// Gitignore: files the recipe dir's .gitignore names are not inputs
	// either (gitignore = true); .dbforkignore and DefaultIgnores always
	// apply below input dirs.
	Gitignore bool
	// Env names variables of the caller's environment that run steps get
	// besides PATH, the virtualenv and the like (not part of the key).
	Env     []string
	ignores ignoreRules
}

// Cache names OCI repositories ("registry/repo") from which a golden is
// pulled instead of built, and to which a fresh build is pushed.
type Cache struct {
	From string
	To   string
}

// Step kinds.
const (
	StepSQL  = "sql"
	StepDump = "dump"
	StepRun  = "run"
)

// Step is one load step. Files are the inputs whose content is part of the
// key: the SQL files or dump for sql/dump, the declared inputs for run.
type Step struct {
	Kind    string
	Name    string   // label shown in progress and errors
	Files   []string // absolute paths, in load order
	Command string   // for run
}

// Pool holds warm-pool settings for `dbfork serve`.
type Pool struct {
	Min int
	Max int
	// MaxSet says the recipe set max. Unset, the daemon grows the pool
	// past the default as more leases are asked for at once.
	MaxSet bool
	// Prewarm reads every file of a pooled clone once before it is
	// handed out, so its pages are cached (default true).
	Prewarm bool
	// Hot tables are opened read-write during the prewarm, so OverlayFS
	// copies them up in the pool rather than on a test's first write.
	Hot []string
	// Ahead is how many instances past Max a pool of a golden with slots
	// may make for its leases' next instances; -1 (unset): as many as
	// the pool's max, one per lease. 0: a lease whose slots ran out
	// resets in place.
	Ahead int
}

// MaxPoolSize is the largest max a pool may have.
const MaxPoolSize = 256

// DefaultPoolMax is a pool's max when the recipe sets none.
const DefaultPoolMax = 8

// CheckSize is the one pool-size rule: recipes and API calls that override
// a recipe's sizes both apply it (the pool package only keeps its own
// structural invariant).
func (p Pool) CheckSize() error {
	if p.Min < 0 || p.Max < 1 || p.Min > p.Max || p.Max > MaxPoolSize {
		return fmt.Errorf("pool needs 0 <= min <= max and 1 <= max <= %d (got min=%d max=%d)", MaxPoolSize, p.Min, p.Max)
	}
	if p.Ahead < -1 || p.Ahead > MaxPoolSize {
		return fmt.Errorf("pool ahead must be 0..%d (got %d)", MaxPoolSize, p.Ahead)
	}
	return nil
}

type rawRecipe struct {
	Engine   string         `toml:"engine"`
	Version  string         `toml:"version"`
	Bindir   string         `toml:"bindir"`
	Fetch    *bool          `toml:"fetch"`
	Database string         `toml:"database"`
	Owner    string         `toml:"owner"`
	Locale   string         `toml:"locale"`
	Encoding string         `toml:"encoding"`
	Freeze   *bool          `toml:"freeze"`
	Settings map[string]any `toml:"settings"`
	Load     []rawStep      `toml:"load"`
	Pool     *rawPool       `toml:"pool"`
	Fresh    *rawFresh      `toml:"fresh"`
	Cache    *rawCache      `toml:"cache"`
	Gitign   bool           `toml:"gitignore"`
	Env      stringList     `toml:"env"`
}

type rawCache struct {
	From string `toml:"from"`
	To   string `toml:"to"`
}

type rawStep struct {
	SQL    stringList `toml:"sql"`
	Dump   string     `toml:"dump"`
	Run    string     `toml:"run"`
	Inputs stringList `toml:"inputs"`
	Name   string     `toml:"name"`
}

type rawPool struct {
	Min     *int       `toml:"min"`
	Max     *int       `toml:"max"`
	Ahead   *int       `toml:"ahead"`
	Prewarm *bool      `toml:"prewarm"`
	Hot     stringList `toml:"hot"`
}

// stringList accepts `key = "one"` as well as `key = ["one", "two"]`.
type stringList []string

func (s *stringList) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		*s = []string{v}
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return fmt.Errorf("expected a string or a list of strings, got %T in the list", e)
			}
			*s = append(*s, str)
		}
	default:
		return fmt.Errorf("expected a string or a list of strings, got %T", v)
	}
	return nil
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

var engineNameRe = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Load reads and validates the recipe at path.
func Load(path string) (*Recipe, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, errs.Invalid("recipe %s: %w", path, err)
	}
	return LoadAt(abs, path)
}

// LoadAt is Load of the absolute path abs, named path in errors (as the
// user gave it).
func LoadAt(abs, path string) (*Recipe, error) {
	data, err := readRecipe(abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errs.NotFound("recipe %s not found (create one, see README \"Recipe\", or pass -f FILE)", path)
	}
	if err != nil {
		return nil, errs.Invalid("recipe %s: %w", path, err)
	}
	return Parse(abs, data)
}

// Parse validates recipe text; path names it in errors and anchors relative
// paths.
func Parse(path string, data []byte) (*Recipe, error) {
	name := filepath.Base(path)
	var raw rawRecipe
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		return nil, syntaxError(name, data, err)
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		keys := make([]string, len(undec))
		for i, k := range undec {
			keys[i] = k.String()
		}
		return nil, errs.Invalid("%s: unknown key %q (known: engine, version, bindir, database, owner, locale, encoding, freeze, gitignore, env, settings, [[load]] sql/dump/run/inputs/name, [pool] min/max/prewarm/hot, [fresh] slots, [cache] from/to)", name, keys[0])
	}
	r := &Recipe{Path: path, Dir: filepath.Dir(path), Gitignore: raw.Gitign}
	for _, n := range raw.Env {
		if !envNameRe.MatchString(n) {
			return nil, errs.Invalid("%s: env: %q is not a variable name (letters, digits and _, not starting with a digit)", name, n)
		}
		r.Env = append(r.Env, n)
	}
	if r.ignores, err = loadIgnores(r.Dir, r.Gitignore); err != nil {
		return nil, errs.Invalid("%s: %w", name, err)
	}
	if err := r.fill(name, &raw); err != nil {
		return nil, err
	}
	return r, nil
}

func syntaxError(name string, data []byte, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		msg := strings.TrimSpace(strings.SplitN(pe.Message, "\n", 2)[0])
		line := pe.Position.Line
		// The parser counts an unexpected newline as part of the next
		// line; name the line the newline ends instead.
		if st := pe.Position.Start; st > 0 && st <= len(data) {
			line = strings.Count(string(data[:st]), "\n") + 1
		}
		return errs.Invalid("%s:%d: syntax error: %s", name, line, msg)
	}
	// Type mismatches come back as plain errors naming the key.
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	return errs.Invalid("%s: %s", name, msg)
}

func (r *Recipe) fill(name string, raw *rawRecipe) error {
	// Only the spelling is checked here: which engines exist is the
	// engine registry's to say, when the engine is opened (aliases too).
	r.Engine = strings.ToLower(strings.TrimSpace(raw.Engine))
	switch {
	case r.Engine == "":
		return errs.Invalid("%s: engine is missing (set engine = \"postgres\", \"mariadb\" or \"mysql\")", name)
	case !engineNameRe.MatchString(r.Engine):
		return errs.Invalid("%s: engine %q is not an engine name (a word such as \"postgres\")", name, raw.Engine)
	}
	r.Version = raw.Version
	if raw.Version != "" && !regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`).MatchString(raw.Version) {
		return errs.Invalid("%s: version %q is not a version number (e.g. \"15\" or \"10.11\")", name, raw.Version)
	}
	if raw.Bindir != "" {
		r.Bindir = r.resolve(raw.Bindir)
	}
	r.NoFetch = raw.Fetch != nil && !*raw.Fetch
	r.Database = orDefault(raw.Database, "app")
	r.Owner = orDefault(raw.Owner, "app")
	for key, v := range map[string]string{"database": r.Database, "owner": r.Owner} {
		if !identRe.MatchString(v) {
			return errs.Invalid("%s: %s %q must be a plain identifier (letters, digits, _; at most 63)", name, key, v)
		}
	}
	r.Locale = orDefault(raw.Locale, "C")
	r.Encoding = orDefault(raw.Encoding, "UTF8")
	if !regexp.MustCompile(`^[A-Za-z0-9_.@-]+$`).MatchString(r.Locale + r.Encoding) {
		return errs.Invalid("%s: locale %q or encoding %q has characters that are not allowed", name, r.Locale, r.Encoding)
	}
	r.Freeze = raw.Freeze == nil || *raw.Freeze
	if err := r.fillSettings(name, raw.Settings); err != nil {
		return err
	}
	for i, rs := range raw.Load {
		st, err := r.step(name, i, rs)
		if err != nil {
			return err
		}
		r.Steps = append(r.Steps, st)
	}
	if raw.Cache != nil {
		r.Cache = Cache{From: strings.TrimSpace(raw.Cache.From), To: strings.TrimSpace(raw.Cache.To)}
		for k, v := range map[string]string{"from": r.Cache.From, "to": r.Cache.To} {
			if strings.ContainsAny(v, " \t\n") || strings.Contains(v, "://") {
				return errs.Invalid("%s: [cache] %s = %q: give a repository as registry/name (no scheme, no spaces)", name, k, v)
			}
		}
	}
	if err := r.fillFresh(name, raw.Fresh); err != nil {
		return err
	}
	return r.fillPool(name, raw.Pool)
}

func (r *Recipe) fillSettings(name string, raw map[string]any) error {
	r.Settings = map[string]string{}
	keyRe := regexp.MustCompile(`^[a-z_][a-z0-9_.]*$`)
	for k, v := range raw {
		if !keyRe.MatchString(k) {
			return errs.Invalid("%s: settings key %q is not a server setting name", name, k)
		}
		switch v := v.(type) {
		case string:
			if strings.ContainsAny(v, "\n\x00") {
				return errs.Invalid("%s: settings.%s holds a newline or NUL", name, k)
			}
			r.Settings[k] = v
		case int64, float64, bool:
			r.Settings[k] = fmt.Sprint(v)
		default:
			return errs.Invalid("%s: settings.%s must be a string, number or boolean", name, k)
		}
	}
	return nil
}

func (r *Recipe) fillPool(name string, raw *rawPool) error {
	r.Pool = Pool{Min: 2, Max: DefaultPoolMax, Prewarm: true, Ahead: -1}
	if raw == nil {
		return nil
	}
	if raw.Prewarm != nil {
		r.Pool.Prewarm = *raw.Prewarm
	}
	for _, t := range raw.Hot {
		if t == "" || strings.ContainsAny(t, "/\\ \t\n;'\"") {
			return errs.Invalid("%s: [pool] hot: %q is not a table name (use \"table\" or \"schema.table\")", name, t)
		}
	}
	r.Pool.Hot = raw.Hot
	if raw.Min != nil {
		r.Pool.Min = *raw.Min
	}
	if raw.Max != nil {
		r.Pool.Max, r.Pool.MaxSet = *raw.Max, true
	}
	if raw.Ahead != nil {
		if *raw.Ahead < 0 {
			return errs.Invalid("%s: [pool] ahead = %d: use 0 (a lease whose slots ran out resets in place) up to %d", name, *raw.Ahead, MaxPoolSize)
		}
		r.Pool.Ahead = *raw.Ahead
	}
	if err := r.Pool.CheckSize(); err != nil {
		return errs.Invalid("%s: %w", name, err)
	}
	return nil
}

func (r *Recipe) step(name string, i int, rs rawStep) (Step, error) {
	where := fmt.Sprintf("%s: load[%d]", name, i+1)
	kinds := 0
	for _, set := range []bool{len(rs.SQL) > 0, rs.Dump != "", rs.Run != ""} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return Step{}, errs.Invalid("%s: needs exactly one of sql, dump or run", where)
	}
	st := Step{Name: rs.Name}
	var patterns []string
	switch {
	case len(rs.SQL) > 0:
		st.Kind, patterns = StepSQL, rs.SQL
	case rs.Dump != "":
		st.Kind, patterns = StepDump, []string{rs.Dump}
	default:
		st.Kind, st.Command, patterns = StepRun, rs.Run, rs.Inputs
	}
	if st.Kind != StepRun && len(rs.Inputs) > 0 {
		return Step{}, errs.Invalid("%s: inputs only belongs to run steps", where)
	}
	for _, p := range patterns {
		files, err := r.expand(p)
		if err != nil {
			return Step{}, errs.Invalid("%s: %w", where, err)
		}
		st.Files = append(st.Files, files...)
	}
	if st.Kind == StepDump && len(st.Files) != 1 {
		return Step{}, errs.Invalid("%s: dump %q must name exactly one file, matched %d", where, rs.Dump, len(st.Files))
	}
	if st.Name == "" {
		st.Name = r.defaultName(st)
	}
	return st, nil
}

func (r *Recipe) defaultName(st Step) string {
	switch st.Kind {
	case StepRun:
		c := st.Command
		if len(c) > 40 {
			c = c[:37] + "..."
		}
		return "run " + c
	case StepDump:
		return "restore " + r.Rel(st.Files[0])
	}
	if len(st.Files) == 1 {
		return "load " + r.Rel(st.Files[0])
	}
	return fmt.Sprintf("load %d SQL files", len(st.Files))
}

func orDefault(v, d string) string {
	if strings.TrimSpace(v) == "" {
		return d
	}
	return v
}
