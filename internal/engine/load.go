package engine

import (
	"context"
	"path/filepath"
	"strings"
)

// Cluster is what a new data dir is created for: the database a golden
// holds, its owner, and the locale and encoding it is created with.
type Cluster struct {
	Database string
	Owner    string
	Locale   string
	Encoding string
}

// Build describes the golden a build server is loading: the database its
// steps go into and where their inputs live. The golden package fills it
// from a recipe; engines know nothing of recipe files.
type Build struct {
	Cluster
	// Path is the recipe file.
	Path string
	// Dir is where steps run and what file names in errors are shown
	// relative to.
	Dir string
	// Freeze asks Finish to freeze and analyze what was loaded.
	Freeze bool
	// Env names variables of the caller's environment passed to run
	// steps besides the usual ones (the recipe's env = [...]).
	Env []string
}

// Rel names a file relative to b.Dir when it lies below it.
func (b Build) Rel(p string) string {
	if rel, err := filepath.Rel(b.Dir, p); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return p
}

// Step kinds.
const (
	StepSQL  = "sql"  // SQL files, in order
	StepDump = "dump" // one dump file
	StepRun  = "run"  // a shell command (a migration tool)
)

// Step is one load step.
type Step struct {
	Kind  string
	Name  string   // label shown in progress and errors
	Files []string // absolute paths, in load order
	// Shown names Files in messages when they are private copies of the
	// recipe's inputs (the bytes a build hashed): Shown[i] is the
	// recipe's own path for Files[i]. Empty: Files are those paths.
	Shown   []string
	Command string // for StepRun
}

// Loader loads a golden's content into a running build server: the
// other half of an engine, beside the server lifecycle of Engine. A value
// that only runs clones of goldens made elsewhere need not implement it.
type Loader interface {
	// Setup creates the build's database and owner on a fresh build
	// server.
	Setup(ctx context.Context, srv *Server, b Build) error
	// Load runs one step against a running build server.
	Load(ctx context.Context, srv *Server, b Build, st Step, out LogWriter) error
	// Finish prepares a loaded golden for cloning (freeze, analyze).
	Finish(ctx context.Context, srv *Server, b Build) error
}

// Want names the server a golden needs: what the engines registry opens
// (the golden package fills it from a recipe).
type Want struct {
	Engine  string // registry name or alias
	Version string // wanted major version; empty: whatever is found
	Bindir  string // where the server binaries are; empty: search
	// NoFetch forbids fetching a server build into the engine cache.
	NoFetch bool
	// Settings are the server settings instances get; an engine refuses
	// the ones it keeps for itself.
	Settings map[string]string
	// Recipe names the recipe file in errors about its choices.
	Recipe string
}

// ShownName is how messages name st.Files[i]: relative to b.Dir, by the
// recipe's own path even when the build loads a private copy.
func (st Step) ShownName(b Build, i int) string {
	if i < len(st.Shown) {
		return b.Rel(st.Shown[i])
	}
	return b.Rel(st.Files[i])
}
