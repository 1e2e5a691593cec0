package fetch

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// Maven reaches Maven artifacts through what the machine already has:
// the repository URL the user configured (over HTTP), else the mvn
// command (its settings, mirrors, proxies and credentials apply).
type Maven struct {
	RepoURL string // base URL of a Maven repository; empty: use mvn
	Mvn     string // the mvn command; empty: not installed
	// LocalRepo is mvn's local repository; empty: read from settings
	// (~/.m2/settings.xml localRepository) or ~/.m2/repository.
	LocalRepo string
	Client    *http.Client
	// PlainHTTP allows an http:// RepoURL: the user said so explicitly
	// (DBFORK_MAVEN_PLAIN_HTTP=1). Pins still decide what is installed.
	PlainHTTP bool
}

func (m *Maven) check() error {
	if m.RepoURL == "" && m.Mvn == "" {
		return errs.MissingTool("cannot fetch engines: no fetch tool configured; install Maven (mvn) or set DBFORK_MAVEN_REPO to a Maven repository URL (or a <mirror> in ~/.m2/settings.xml)")
	}
	if m.RepoURL == "" {
		return nil
	}
	u, err := url.Parse(m.RepoURL)
	switch {
	case err != nil || u.Host == "":
		return errs.Invalid("maven repository URL %q is not an https URL", m.RepoURL)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && m.PlainHTTP:
		return nil
	case u.Scheme == "http":
		return errs.Invalid("maven repository %s is plain http (anyone on the way can change what it sends); use https, or allow plain http explicitly with DBFORK_MAVEN_PLAIN_HTTP=1", m.RepoURL)
	}
	return errs.Invalid("maven repository URL %q: only https (or, allowed explicitly, http) is supported", m.RepoURL)
}

// Describe says where artifacts come from, for doctor and errors.
func (m *Maven) Describe() string {
	switch {
	case m.RepoURL != "":
		return "Maven repository " + m.RepoURL
	case m.Mvn != "":
		return "mvn (" + m.Mvn + ")"
	}
	return "nothing (install Maven or set DBFORK_MAVEN_REPO)"
}

type metadata struct {
	Versions []string `xml:"versioning>versions>version"`
}

// versions lists the published versions of group:artifact; mvn runs as
// the worker w.
func (m *Maven) versions(ctx context.Context, w *worker, group, artifact string) ([]string, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	var docs [][]byte
	if m.RepoURL != "" {
		body, err := m.get(ctx, m.artifactURL(group, artifact, "maven-metadata.xml"))
		if err != nil {
			return nil, fmt.Errorf("list versions of %s:%s: %w", group, artifact, err)
		}
		docs = append(docs, body)
	} else {
		// RELEASE makes mvn refresh the artifact's metadata (one small
		// pom comes along); the versions are then in the local repo.
		_, err := m.run(ctx, w, "-U", "dependency:get", "-Dartifact="+group+":"+artifact+":RELEASE:pom", "-Dtransitive=false")
		if eerr := w.end(ctx); err == nil {
			err = eerr
		}
		if err != nil {
			return nil, fmt.Errorf("list versions of %s:%s: %w", group, artifact, err)
		}
		repo, rel := m.repoOf(w), artifactDir(group, artifact)
		names, _ := listBeneath(repo, rel)
		for _, n := range names {
			if strings.HasPrefix(n, "maven-metadata-") && strings.HasSuffix(n, ".xml") {
				if b, err := readBeneath(repo, filepath.Join(rel, n), 16<<20); err == nil {
					docs = append(docs, b)
				}
			}
		}
	}
	var all []string
	for _, d := range docs {
		var md metadata
		if err := xml.Unmarshal(d, &md); err != nil {
			return nil, fmt.Errorf("read maven metadata of %s:%s: %w", group, artifact, err)
		}
		all = append(all, md.Versions...)
	}
	if len(all) == 0 {
		return nil, errs.NotFound("no versions of %s:%s found through %s", group, artifact, m.Describe())
	}
	return Sorted(all), nil
}

// jar makes the jar of one version a file of ours, dst, with the SHA-1
// the repository published beside it checked, and returns its sums. mvn
// runs as the worker w; its jar is read only once w has ended.
func (m *Maven) jar(ctx context.Context, w *worker, group, artifact, version, dst string) (sums, error) {
	if err := m.check(); err != nil {
		return sums{}, err
	}
	name := artifact + "-" + version + ".jar"
	var want string
	var got sums
	if m.RepoURL != "" {
		if err := m.download(ctx, m.artifactURL(group, artifact, version+"/"+name), dst); err != nil {
			return sums{}, err
		}
		if err := os.Chmod(dst, 0o644); err != nil { // the unpacker reads it
			return sums{}, err
		}
		sum, err := m.get(ctx, m.artifactURL(group, artifact, version+"/"+name+".sha1"))
		if err != nil {
			return sums{}, fmt.Errorf("checksum of %s: %w", name, err)
		}
		want = firstField(string(sum))
		f, err := os.Open(dst)
		if err != nil {
			return sums{}, err
		}
		got, err = copyHashed(f, "")
		f.Close()
		if err != nil {
			return sums{}, err
		}
	} else {
		// -C: fail, not warn, when the download does not match the
		// repository's checksum.
		_, err := m.run(ctx, w, "-C", "dependency:get", "-Dartifact="+group+":"+artifact+":"+version, "-Dtransitive=false")
		if eerr := w.end(ctx); err == nil {
			err = eerr
		}
		if err != nil {
			return sums{}, err
		}
		repo, rel := m.repoOf(w), filepath.Join(artifactDir(group, artifact), version, name)
		sum, err := readBeneath(repo, rel+".sha1", 4096)
		if err != nil {
			return sums{}, fmt.Errorf("mvn left no checksum beside %s: %w", filepath.Join(repo, rel), err)
		}
		want = firstField(string(sum))
		f, err := openBeneath(repo, rel)
		if err != nil {
			return sums{}, err
		}
		got, err = copyHashed(f, dst)
		f.Close()
		if err != nil {
			return sums{}, err
		}
		got.local = filepath.Join(repo, rel)
	}
	if !strings.EqualFold(got.sha1, want) {
		_ = os.Remove(dst)
		return sums{}, fmt.Errorf("%w: %s has SHA-1 %s but the repository says %s; refused%s", ErrChecksum, name, got.sha1, want, m.forget(w, got.local))
	}
	return got, nil
}

// forget removes a refused jar from mvn's local repository, which would
// otherwise hand the same file to every retry, and says so. A worker's
// private repository goes away with its fetch anyway.
func (m *Maven) forget(w *worker, local string) string {
	if local == "" || w.dropped() {
		return ""
	}
	_ = os.Remove(local)
	_ = os.Remove(local + ".sha1")
	return " (removed from mvn's local repository " + filepath.Dir(local) + "; a retry downloads it again)"
}

// repoOf is the local repository mvn fills for w: a private one when w is
// another uid (nothing of the caller's, nothing shared between fetches),
// else the user's own.
func (m *Maven) repoOf(w *worker) string {
	if w.dropped() {
		return filepath.Join(w.dir, ".m2", "repository")
	}
	return m.localRepo()
}

func artifactDir(group, artifact string) string {
	return filepath.Join(filepath.FromSlash(strings.ReplaceAll(group, ".", "/")), artifact)
}

func (m *Maven) localRepo() string {
	if m.LocalRepo != "" {
		return m.LocalRepo
	}
	home, _ := os.UserHomeDir()
	if b, err := os.ReadFile(filepath.Join(home, ".m2", "settings.xml")); err == nil {
		var s struct {
			LocalRepository string `xml:"localRepository"`
		}
		if xml.Unmarshal(b, &s) == nil && strings.TrimSpace(s.LocalRepository) != "" {
			return strings.ReplaceAll(strings.TrimSpace(s.LocalRepository), "${user.home}", home)
		}
	}
	return filepath.Join(home, ".m2", "repository")
}

// MirrorURL returns the URL of the <mirror> in a Maven settings file that
// stands in for every repository (or for central), or "".
func MirrorURL(settingsXML []byte) string {
	var s struct {
		Mirrors []struct {
			MirrorOf string `xml:"mirrorOf"`
			URL      string `xml:"url"`
		} `xml:"mirrors>mirror"`
	}
	if xml.Unmarshal(settingsXML, &s) != nil {
		return ""
	}
	for _, mr := range s.Mirrors {
		for _, of := range strings.Split(mr.MirrorOf, ",") {
			if of = strings.TrimSpace(of); of == "*" || of == "central" || of == "external:*" {
				return strings.TrimSpace(mr.URL)
			}
		}
	}
	return ""
}

func (m *Maven) artifactURL(group, artifact, rest string) string {
	return strings.TrimRight(m.RepoURL, "/") + "/" + strings.ReplaceAll(group, ".", "/") + "/" + artifact + "/" + rest
}

func (m *Maven) client() *http.Client {
	if m.Client != nil {
		return m.Client
	}
	return http.DefaultClient
}

func (m *Maven) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, errs.Invalid("maven repository URL %q: %w", m.RepoURL, err)
	}
	resp, err := m.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, errs.NotFound("%s: not in the repository (404)", url)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// download writes url to path; a short or failed transfer removes path.
func (m *Maven) download(ctx context.Context, url, path string) (err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return errs.Invalid("maven repository URL %q: %w", m.RepoURL, err)
	}
	resp, err := m.client().Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return errs.NotFound("%s: not in the repository (404)", url)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: %s", url, resp.Status)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	n, err := io.Copy(f, resp.Body)
	if err != nil {
		return fmt.Errorf("download %s: cut after %d bytes: %w", url, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return fmt.Errorf("download %s: cut after %d of %d bytes", url, n, resp.ContentLength)
	}
	return f.Sync()
}

func firstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
