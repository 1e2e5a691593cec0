package fetch

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

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
}

func (m *Maven) check() error {
	if m.RepoURL == "" && m.Mvn == "" {
		return errs.MissingTool("cannot fetch engines: no fetch tool configured; install Maven (mvn) or set DBFORK_MAVEN_REPO to a Maven repository URL (or a <mirror> in ~/.m2/settings.xml)")
	}
	return nil
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

// Versions lists the published versions of group:artifact.
func (m *Maven) Versions(ctx context.Context, group, artifact string) ([]string, error) {
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
		if _, err := m.run(ctx, "-U", "dependency:get", "-Dartifact="+group+":"+artifact+":RELEASE:pom", "-Dtransitive=false"); err != nil {
			return nil, fmt.Errorf("list versions of %s:%s: %w", group, artifact, err)
		}
		files, _ := filepath.Glob(filepath.Join(m.localRepo(), filepath.FromSlash(strings.ReplaceAll(group, ".", "/")), artifact, "maven-metadata-*.xml"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil {
				docs = append(docs, b)
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

// Jar makes the jar of one version available as a local file, with the
// SHA-1 the repository published beside it already checked. tmpDir is
// where an HTTP download goes.
func (m *Maven) Jar(ctx context.Context, group, artifact, version, tmpDir string) (path, sha1sum string, err error) {
	if err := m.check(); err != nil {
		return "", "", err
	}
	name := artifact + "-" + version + ".jar"
	var want string
	if m.RepoURL != "" {
		path = filepath.Join(tmpDir, name)
		if err := m.download(ctx, m.artifactURL(group, artifact, version+"/"+name), path); err != nil {
			return "", "", err
		}
		sum, err := m.get(ctx, m.artifactURL(group, artifact, version+"/"+name+".sha1"))
		if err != nil {
			return "", "", fmt.Errorf("checksum of %s: %w", name, err)
		}
		want = firstField(string(sum))
	} else {
		// -C: fail, not warn, when the download does not match the
		// repository's checksum.
		if _, err := m.run(ctx, "-C", "dependency:get", "-Dartifact="+group+":"+artifact+":"+version, "-Dtransitive=false"); err != nil {
			return "", "", err
		}
		path = filepath.Join(m.localRepo(), filepath.FromSlash(strings.ReplaceAll(group, ".", "/")), artifact, version, name)
		sum, err := os.ReadFile(path + ".sha1")
		if err != nil {
			return "", "", fmt.Errorf("mvn left no checksum beside %s: %w", path, err)
		}
		want = firstField(string(sum))
	}
	got, err := fileSHA1(path)
	if err != nil {
		return "", "", err
	}
	if !strings.EqualFold(got, want) {
		// Removed wherever it came from: mvn would otherwise hand the
		// same damaged file to every retry.
		_ = os.Remove(path)
		where := ""
		if m.RepoURL == "" {
			_ = os.Remove(path + ".sha1")
			where = " (removed from mvn's local repository " + filepath.Dir(path) + "; a retry downloads it again)"
		}
		return "", "", fmt.Errorf("%w: %s has SHA-1 %s but the repository says %s; refused%s", ErrChecksum, name, got, want, where)
	}
	return path, got, nil
}

// ErrChecksum is wrapped by checksum mismatches.
var ErrChecksum = errors.New("checksum mismatch")

var ansiRe = regexp.MustCompile("\x1b\\[[0-9;]*m")

func (m *Maven) run(ctx context.Context, args ...string) (string, error) {
	// mvn (Java) takes its home from the password database, dbfork from
	// $HOME: where they differ (sudo -E, CI containers), mvn would read
	// another settings.xml and fill another local repository than the
	// one dbfork reads. So mvn is told both.
	argv := append([]string{"-q", "-B", "-Dstyle.color=never", "-Dmaven.repo.local=" + m.localRepo()}, args...)
	cmd := exec.CommandContext(ctx, m.Mvn, argv...)
	cmd.Dir = os.TempDir()
	cmd.Env = os.Environ()
	// Not over a user.home the user gave mvn already, and not a home
	// with blanks (mvn splits MAVEN_OPTS on them).
	opts := os.Getenv("MAVEN_OPTS")
	if home, err := os.UserHomeDir(); err == nil && !strings.Contains(opts, "-Duser.home=") && !strings.ContainsAny(home, " \t\n") {
		cmd.Env = append(cmd.Env, "MAVEN_OPTS="+strings.TrimSpace(opts+" -Duser.home="+home))
	}
	cmd.SysProcAttr = dieWithParent()
	out, err := cmd.CombinedOutput()
	text := ansiRe.ReplaceAllString(string(out), "")
	if err == nil {
		return text, nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if strings.Contains(text, "Could not find artifact") || strings.Contains(text, "could not be resolved") && strings.Contains(text, "not found") {
		return "", errs.NotFound("mvn found no %s", artifactOf(args))
	}
	return "", fmt.Errorf("mvn %s failed: %v: %s", strings.Join(args, " "), err, mvnErrors(text))
}

func artifactOf(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "-Dartifact=") {
			return strings.TrimPrefix(a, "-Dartifact=")
		}
	}
	return "artifact"
}

// mvnErrors keeps the first [ERROR] lines of mvn's output on one line.
func mvnErrors(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "[ERROR]"))
		if l != "" && len(keep) < 2 {
			keep = append(keep, l)
		}
	}
	s := strings.Join(keep, " ")
	if len(s) > 400 {
		s = s[:397] + "..."
	}
	return s
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
		return nil, errs.Invalid("maven repository URL %q: %v", m.RepoURL, err)
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
		return errs.Invalid("maven repository URL %q: %v", m.RepoURL, err)
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

func fileSHA1(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha1.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dieWithParent makes a fetch tool (mvn, pip) get SIGKILL when dbfork
// dies: a dbfork killed mid-fetch leaves no download running on.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
