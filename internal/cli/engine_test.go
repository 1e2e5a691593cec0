package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// sharedEngineCache is the engine cache the test packages share
// ($DBFORK_ENGINE_CACHE; CI fills it once per run).
func sharedEngineCache(t *testing.T) string {
	dir := os.Getenv("DBFORK_ENGINE_CACHE")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "dbfork-engine-cache")
	}
	if _, err := exec.LookPath("mvn"); err != nil && os.Getenv("DBFORK_MAVEN_REPO") == "" && os.Getenv("CI") == "" {
		t.Skip("mvn is not installed (apt-get install maven); CI installs it")
	}
	return dir
}

// pinRecipe rewrites the project's recipe to ask for a server version.
func pinRecipe(t *testing.T, e *env, lines string) {
	p := filepath.Join(e.proj, "dbfork.toml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := regexp.MustCompile(`(?m)^version = .*\n`).ReplaceAllString(string(b), "")
	s = strings.Replace(s, `engine = "postgres"`, "engine = \"postgres\"\n"+lines, 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFetchedPostgres(t *testing.T) {
	cache := []string{"DBFORK_ENGINE_CACHE=" + sharedEngineCache(t)}
	e := newEnv(t)
	pinRecipe(t, e, `version = "16"`)
	r := e.runEnv(cache, "build", "--json")
	if r.code != 0 {
		t.Fatalf("build: %d %s", r.code, r.stderr)
	}
	var b16 struct {
		Key     string `json:"key"`
		Version string `json:"engine_version"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &b16); err != nil || !strings.Contains(b16.Version, "(PostgreSQL) 16.") {
		t.Fatalf("build 16: %v %s", err, r.stdout)
	}
	// `run` exports a PATH whose psql talks to the fetched server, and
	// the recipe's run step (psql) worked against it.
	r = e.runEnv(cache, "run", "--", "sh", "-c", `psql -XAtc "select version(), count(*) from items" && command -v psql`)
	if r.code != 0 || !strings.Contains(r.stdout, "PostgreSQL 16.") || !strings.Contains(r.stdout, "|3001") {
		t.Fatalf("run: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); !strings.HasPrefix(lines[len(lines)-1], strings.TrimPrefix(cache[0], "DBFORK_ENGINE_CACHE=")) &&
		!strings.HasPrefix(lines[len(lines)-1], "/usr/lib/postgresql/") {
		t.Fatalf("psql on run's PATH: %s", lines[len(lines)-1])
	}
	// The same recipe on another version is another golden.
	pinRecipe(t, e, `version = "17"`)
	r = e.runEnv(cache, "build", "--json")
	var b17 struct {
		Key     string `json:"key"`
		Version string `json:"engine_version"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &b17) != nil || b17.Key == b16.Key || !strings.Contains(b17.Version, "(PostgreSQL) 17.") {
		t.Fatalf("build 17: %d %s %s (16's key %s)", r.code, r.stdout, r.stderr, b16.Key)
	}
	r = e.runEnv(cache, "engine", "ls", "--json")
	var ls struct {
		Engines []struct{ Engine, Version string } `json:"engines"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ls) != nil || len(ls.Engines) < 2 {
		t.Fatalf("engine ls: %d %s", r.code, r.stdout)
	}
	r = e.runEnv(cache, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "engine cache") || !strings.Contains(r.stdout, "PostgreSQL) 17.") {
		t.Fatalf("doctor: %d %s", r.code, r.stdout)
	}
}

func TestEngineBadInput(t *testing.T) {
	e := newEnv(t)
	empty := "DBFORK_ENGINE_CACHE=" + filepath.Join(e.root, "no-engines")
	pinRecipe(t, e, `version = "16"`)
	oneLine := func(r result, code int, want ...string) {
		t.Helper()
		msg := strings.TrimSpace(r.stderr)
		if r.code != code || strings.Contains(msg, "\n") {
			t.Fatalf("exit %d (want %d): %s", r.code, code, r.stderr)
		}
		for _, w := range want {
			if !strings.Contains(msg, w) {
				t.Fatalf("%q lacks %q", msg, w)
			}
		}
	}
	// Downloads off: say how to get the engine.
	oneLine(e.runEnv([]string{empty, "DBFORK_OFFLINE=1"}, "build"), 3, "downloads are off", "dbfork engine install postgres@16")
	oneLine(e.runEnv([]string{empty}, "--offline", "build"), 3, "dbfork engine install postgres@16")
	pinRecipe(t, e, "version = \"16\"\nfetch = false")
	oneLine(e.runEnv([]string{empty}, "build"), 3, "fetch = false")
	// No way to fetch at all: say what to set.
	home := filepath.Join(e.root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	noTools := []string{empty, "PATH=" + filepath.Join(e.root, "nobin"), "HOME=" + home, "DBFORK_MAVEN_REPO="}
	oneLine(e.runEnv(noTools, "engine", "install", "postgres@16"), 4, "DBFORK_MAVEN_REPO", "mvn")
	oneLine(e.run("engine", "install", "postgres"), 2, "ENGINE@VERSION")
	oneLine(e.run("engine", "install", "oracle@23"), 4, "oracle")
	oneLine(e.runEnv([]string{empty}, "engine", "install", "postgres@16.99.0", "--sha256", "not-a-sum"), 2, "--sha256", "not a sha256")
	oneLine(e.runEnv([]string{empty, "DBFORK_MAVEN_REPO=http://127.0.0.1:9/maven2"}, "engine", "install", "postgres@16"), 2, "plain http", "DBFORK_MAVEN_PLAIN_HTTP=1")
	oneLine(e.runEnv([]string{empty}, "engine", "rm", "postgres@16.4.0"), 3, "not in the engine cache")
	if _, err := os.Stat(filepath.Join(e.root, "no-engines")); err == nil {
		entries, _ := os.ReadDir(filepath.Join(e.root, "no-engines"))
		for _, en := range entries {
			if !strings.HasSuffix(en.Name(), ".lock") {
				t.Fatalf("failed commands left %s in the engine cache", en.Name())
			}
		}
	}
}
