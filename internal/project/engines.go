package project

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/engine/engines"
	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/store"
)

// EngineCache is how server builds are found when none is installed:
// plain values a front end read from its flags and environment.
type EngineCache struct {
	Dir            string // "": the store's own (STORE/engines)
	Offline        bool   // never download
	MavenRepo      string // a Maven repository base URL; "": mvn, else ~/.m2's mirror
	MavenPlainHTTP bool   // allow an http:// MavenRepo
	Notify         func(msg string)
}

// FetchOptions are the engine cache options for store s: c, plus the
// Maven and pip clients this machine has.
func FetchOptions(s *store.Store, c EngineCache) fetch.Options {
	dir := c.Dir
	if dir == "" {
		dir = s.EnginesDir()
	}
	mvn, _ := exec.LookPath("mvn")
	repo := c.MavenRepo
	if repo == "" && mvn == "" {
		repo = settingsMirror()
	}
	pip, _ := exec.LookPath("pip3")
	if pip == "" {
		pip, _ = exec.LookPath("pip")
	}
	return fetch.Options{Dir: dir, Offline: c.Offline, Maven: fetch.Maven{RepoURL: repo, Mvn: mvn, PlainHTTP: c.MavenPlainHTTP},
		Pip: pip, Notify: c.Notify}
}

// settingsMirror is the Maven mirror the user's settings.xml names, for
// fetching over HTTP when there is no mvn. As root, root's own settings
// (never $HOME's: under sudo -E it is the caller's).
func settingsMirror() string {
	home, err := os.UserHomeDir()
	if os.Geteuid() == 0 {
		home, err = "/root", nil
		if u, uerr := user.LookupId("0"); uerr == nil && u.HomeDir != "" {
			home = u.HomeDir
		}
	}
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(home, ".m2", "settings.xml"))
	if err != nil {
		return ""
	}
	return fetch.MirrorURL(b)
}

// NewOpener finds installed servers first, then builds in the engine
// cache o describes (fetched when allowed).
func NewOpener(o fetch.Options) Opener {
	return engines.NewOpener(o).Open
}
