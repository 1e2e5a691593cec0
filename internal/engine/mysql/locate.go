package mysql

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
)

// Binaries is a located installation.
type Binaries struct {
	Server  string // mariadbd / mysqld
	Install string // mariadb-install-db (MariaDB only)
	Client  string // mariadb / mysql
	Basedir string // the install's root when it is not a system install (fetched builds)
	Info    ServerInfo
}

// LocateAt uses the install rooted at basedir as it is (a fetched build:
// bin/mariadbd, bin/mariadb, scripts/mariadb-install-db, share/).
func LocateAt(ctx context.Context, flavor Flavor, basedir string) (*Binaries, error) {
	b := &Binaries{Basedir: basedir, Server: filepath.Join(basedir, "bin", "mariadbd"),
		Install: filepath.Join(basedir, "scripts", "mariadb-install-db"), Client: filepath.Join(basedir, "bin", "mariadb")}
	if flavor != MariaDB {
		b.Server, b.Install, b.Client = filepath.Join(basedir, "bin", "mysqld"), "", filepath.Join(basedir, "bin", "mysql")
	}
	for _, p := range []string{b.Server, b.Install, b.Client} {
		if p != "" && !executable(p) {
			return nil, errs.MissingTool("%s install in %s lacks %s", flavor, basedir, filepath.Base(p))
		}
	}
	for _, p := range []string{b.Server, b.Install} {
		if p == "" {
			continue
		}
		if err := engine.TrustedBinaries(filepath.Dir(p), []string{filepath.Base(p)}); err != nil {
			return nil, errs.Invalid("%w", err)
		}
	}
	out, err := engine.ProbeCombined(ctx, b.Server, "--no-defaults", "--version")
	if err != nil {
		return nil, errs.Unsupported("%s in %s cannot run: %w: %s", filepath.Base(b.Server), basedir, err, strings.TrimSpace(string(out)))
	}
	if b.Info, err = ParseVersion(string(out)); err != nil {
		return nil, err
	}
	return b, nil
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// serverDirs are the places servers are installed: the recipe's bindir,
// PATH, then the usual prefixes.
func serverDirs(bindir string) []string {
	if bindir != "" {
		return []string{bindir}
	}
	dirs := filepath.SplitList(os.Getenv("PATH"))
	return append(dirs, "/usr/sbin", "/usr/libexec", "/usr/local/mysql/bin", "/usr/local/mariadb/bin",
		"/opt/mysql/bin", "/opt/mariadb/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/bin")
}

// Locate finds a server of the wanted flavor (and major version, "10.11"
// or "8"), its client and, for MariaDB, its install tool.
func Locate(ctx context.Context, flavor Flavor, bindir, want string) (*Binaries, error) {
	names := map[Flavor][]string{MariaDB: {"mariadbd", "mysqld"}, MySQL: {"mysqld"}}[flavor]
	var looked []string
	var other *ServerInfo
	var untrusted error
	seen := map[string]bool{}
	for _, dir := range serverDirs(bindir) {
		for _, n := range names {
			p := filepath.Join(dir, n)
			real, err := filepath.EvalSymlinks(p)
			if err != nil || seen[real] || !executable(real) {
				continue
			}
			seen[real] = true
			looked = append(looked, p)
			if err := engine.TrustedBinaries(dir, []string{n}); err != nil {
				untrusted = err
				continue
			}
			out, err := engine.Probe(ctx, p, "--no-defaults", "--version")
			if err != nil {
				continue
			}
			info, err := ParseVersion(string(out))
			if err != nil {
				continue
			}
			if info.Flavor != flavor {
				other = &info
				continue
			}
			if want != "" && info.Version != want && !strings.HasPrefix(info.Version, want+".") {
				continue
			}
			b := &Binaries{Server: p, Info: info}
			if err := b.findTools(bindir); err != nil {
				return b, err
			}
			if b.Install != "" {
				if err := engine.TrustedBinaries(filepath.Dir(b.Install), []string{filepath.Base(b.Install)}); err != nil {
					return nil, errs.Invalid("%w", err)
				}
			}
			return b, nil
		}
	}
	if bindir != "" && untrusted != nil {
		return nil, errs.Invalid("bindir %s: %w", bindir, untrusted)
	}
	label := map[Flavor]string{MariaDB: "MariaDB", MySQL: "MySQL"}[flavor]
	if want != "" {
		label += " " + want
	}
	install := map[Flavor]string{MariaDB: "apt-get install mariadb-server", MySQL: "install MySQL 8 from Oracle's packages (Debian ships only MariaDB)"}[flavor]
	hint := ""
	if other != nil {
		hint = "; found " + string(other.Flavor) + " " + other.Version + " instead (set engine = \"" + string(other.Flavor) + "\" to use it)"
	}
	where := strings.Join(looked, ", ")
	if where == "" {
		where = "no mariadbd or mysqld in " + strings.Join(serverDirs(bindir), ":")
	}
	return nil, errs.MissingTool("%s server not found (looked at %s)%s; %s, or set bindir in dbfork.toml", label, where, hint, install)
}

func (b *Binaries) findTools(bindir string) error {
	dir := filepath.Dir(b.Server)
	cands := []string{dir, filepath.Join(filepath.Dir(dir), "bin"), filepath.Join(filepath.Dir(dir), "scripts"), "/usr/bin", "/usr/local/bin"}
	if bindir != "" {
		cands = append([]string{bindir}, cands...)
	}
	cands = append(cands, filepath.SplitList(os.Getenv("PATH"))...)
	find := func(names ...string) string {
		for _, d := range cands {
			for _, n := range names {
				if p := filepath.Join(d, n); executable(p) {
					return p
				}
			}
		}
		return ""
	}
	if b.Info.Flavor == MariaDB {
		b.Client = find("mariadb", "mysql")
		b.Install = find("mariadb-install-db", "mysql_install_db")
		if b.Install == "" {
			return errs.MissingTool("mariadb-install-db not found next to %s; install it: apt-get install mariadb-server", b.Server)
		}
	} else {
		b.Client = find("mysql")
	}
	if b.Client == "" {
		return errs.MissingTool("the %s command-line client was not found; install it: apt-get install %s-client", b.Info.Flavor, b.Info.Flavor)
	}
	return nil
}
