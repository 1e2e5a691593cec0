// Package engine defines what dbfork needs from a database server, in
// two interfaces: Engine, the server lifecycle (initialise a data dir,
// start it under a profile, know when it is really ready, stop it
// cleanly, describe how clients connect), and Loader (create a build's
// database, load steps into it, finish it for cloning). postgres/ and
// mysql/ implement both. The package takes plain values (Cluster, Build,
// Step, Want) and knows nothing of recipe files; golden translates.
package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/proc"
)

// Profiles.
const (
	ProfileSafe = "safe" // engine defaults, durable: golden builds
	ProfileTest = "test" // durability off, small memory: clones
)

// Engine is one database server flavour with its binaries located: the
// server lifecycle (init, start until ready, stop, how clients connect).
// Loading a golden's content into a build server is a separate concern
// (Loader), which the same value usually implements too.
//
// Checklist for an implementation (the shared suite in enginetest checks
// each point):
//   - Version is the exact server version; it is part of every key.
//   - Init creates a cluster in an empty dir owned by spec.User.
//   - Start returns only when a real query through a real connection
//     succeeded, or an error that carries the server log's tail. The
//     returned Server is valid even on error when a process was started,
//     so callers can record and stop it.
//   - Servers listen on spec.SocketDir and, when spec.Listen, on
//     127.0.0.1 only.
//   - Stop with Clean=true leaves a data dir that starts without crash
//     recovery.
//
// Optional abilities, asked with a type assertion and all declared in
// this package: Loader (builds), CleanChecker, Sealer, BuildTuner,
// SlotMaker (optional.go), SettingsChecker (protected.go), HotFiler,
// PageSizer, DatabaseCloner, ArtifactChecker (below). What dbfork knows
// of an engine without a value of it is its Driver (driver.go).
type Engine interface {
	Name() string
	Version(ctx context.Context) (string, error)
	// InitOptions are the init-time choices that change the data dir;
	// they are part of the key.
	InitOptions(c Cluster) map[string]string
	Init(ctx context.Context, spec InitSpec) error
	Start(ctx context.Context, spec StartSpec) (*Server, error)
	Stop(ctx context.Context, srv *Server, clean bool) error
	// PIDFile is where the server writes its PID in a data dir: the
	// fallback record when a crash came before dbfork wrote its own.
	PIDFile(dataDir string) string
	// Conn says how clients reach srv.
	Conn(srv *Server) Conn
}

// LogWriter receives output of load steps (the build log).
type LogWriter interface{ Write([]byte) (int, error) }

// InitSpec says where and for whom to create a cluster.
type InitSpec struct {
	DataDir string
	Cluster Cluster
	User    caller.User
	LogFile string
}

// StartSpec says how to run a server on a data dir.
type StartSpec struct {
	DataDir   string
	SocketDir string
	LogFile   string
	RunDir    string // private dir for generated config (pg_hba.conf)
	Port      int    // 0: pick a free loopback port
	// TryPorts are picked first when Port is 0, before asking the kernel
	// (tests hold a port here to prove a collision is retried).
	TryPorts []int
	Listen   bool // also listen on 127.0.0.1:Port
	Profile  string
	Settings map[string]string // recipe [settings], applied last
	User     caller.User
	Database string
	Owner    string
	Password string // set for Owner once ready (TCP logins need it); empty: none
	// Closed are databases the server refuses every connection to (a
	// golden's slots in an instance that hands none out: their files
	// were left out of its check).
	Closed  []string
	Timeout time.Duration
	// OnLaunch is called as soon as the server process exists, before
	// waiting for it to be ready, so the caller can record it.
	OnLaunch func(*Server) error
	// Wrap, when set, changes how the server process is started: it
	// returns the argv to run instead (a helper that ends by exec'ing the
	// server's argv, so the PID stays the server's) and may set process
	// attributes. Rootless OverlayFS clones use it to mount the clone in
	// the server's own user and mount namespaces (see backend.Namespaced).
	Wrap func(argv []string, attr *syscall.SysProcAttr) []string
}

// Server is a started server. It is what instance state records.
type Server struct {
	Engine    string        `json:"engine"`
	Process   proc.Identity `json:"process"`
	Port      int           `json:"port"`
	SocketDir string        `json:"socket_dir"`
	LogFile   string        `json:"log_file"`
	Database  string        `json:"database"`
	User      string        `json:"user"`
	Password  string        `json:"password,omitempty"`
	DataDir   string        `json:"data_dir"`
	Listen    bool          `json:"listen"` // on 127.0.0.1:Port too (builds use the socket only)
	// Root is where the server's own view of the filesystem is seen from
	// outside (/proc/PID/root) when it runs in a mount namespace of its
	// own, in which alone its clone is mounted; empty otherwise.
	Root string `json:"root,omitempty"`

	exited <-chan struct{} // closed when our child exits (nil if not ours)
}

// Exited reports whether a server we started has already exited.
func (s *Server) Exited() bool {
	if s.exited != nil {
		select {
		case <-s.exited:
			return true
		default:
			return false
		}
	}
	return !s.Process.Alive()
}

// Conn is how a client connects: URLs and the environment `run` exports.
type Conn struct {
	URL       string            `json:"url"`        // over 127.0.0.1
	SocketURL string            `json:"socket_url"` // over the unix socket
	Env       map[string]string `json:"env"`
}

// Outside is path as this process can reach it: through the server's
// /proc/PID/root when the server lives in a mount namespace of its own.
func (s *Server) Outside(path string) string {
	if s == nil || s.Root == "" {
		return path
	}
	return s.Root + path
}

// LaunchWrapped starts argv as user in its own session (so a Ctrl-C
// aimed at dbfork does not hit the server before dbfork can stop it
// cleanly), through wrap (StartSpec.Wrap; nil: none), with output
// appended to logFile, and reaps it in the background.
func LaunchWrapped(wrap func([]string, *syscall.SysProcAttr) []string, argv []string, env []string, user caller.User, logFile string) (*Server, error) {
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	_ = user.Chown(logFile)
	attr := &syscall.SysProcAttr{Setsid: true, Credential: user.Credential()}
	if wrap != nil {
		argv = wrap(argv, attr)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Dir = "/"
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	id, err := proc.Of(cmd.Process.Pid)
	if err != nil {
		// Exited at once; the identity is still worth recording.
		id = proc.Identity{PID: cmd.Process.Pid}
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s := &Server{Process: id, LogFile: logFile}
	if wrap != nil {
		s.Root = fmt.Sprintf("/proc/%d/root", id.PID)
	}
	s.exited = done
	return s, nil
}

// LogTail returns the last n lines of a server log, for start errors.
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	return Tail(string(data), n)
}

// BaseEnv is the environment servers run with: minimal and predictable.
func BaseEnv() []string {
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "LC_ALL=C"}
	if tz := os.Getenv("TZ"); tz != "" {
		env = append(env, "TZ="+tz)
	}
	return env
}

// StopRecorded stops a server from its record alone (PID identity), as gc
// must after a crash: PostgreSQL takes SIGINT (fast shutdown) or SIGQUIT
// (immediate), MySQL/MariaDB shut down cleanly on SIGTERM and are simply
// killed when their data is about to be thrown away. A server that
// ignores the signal past the grace period is killed.
func StopRecorded(ctx context.Context, srv *Server, clean bool) error {
	t := TraitsOf(srv.Engine)
	sig, grace := t.FastStop, 10*time.Second
	if clean {
		sig, grace = t.CleanStop, 5*time.Minute
	}
	if err := srv.Process.Stop(ctx, sig, grace); err != nil {
		return fmt.Errorf("stop %s pid %d: %w", srv.Engine, srv.Process.PID, err)
	}
	return nil
}

// RunAs is the SysProcAttr that runs a child as the server user.
func RunAs(u caller.User) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: u.Credential()}
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// HotFiler is implemented by engines that can name the files of tables:
// the pool copies a recipe's hot tables up before a lease (paths are
// relative to the data dir; segments and side files included).
type HotFiler interface {
	TableFiles(ctx context.Context, srv *Server, tables []string) ([]string, error)
}

// PageSizer is implemented by engines that write their data files in
// fixed-size pages. On XFS, clones get a copy-on-write extent size hint of
// one page, so a page write to a reflinked file makes the clone own that
// page and not the 128 KiB default around it.
type PageSizer interface {
	PageSize() uint32
}

// DatabaseCloner is implemented by engines whose running server can copy
// one of its databases by cloning files (PostgreSQL 18 and later with
// file_copy_method = clone): on a filesystem that shares extents, a copy
// of any size takes milliseconds. A lease then hands out a fresh database
// per test instead of resetting the whole instance.
type DatabaseCloner interface {
	// ClonesDatabases says whether this server version can.
	ClonesDatabases() bool
	// MakeTemplate copies srv's own database to name and closes the copy
	// to connections, so it stays idle: a template in use cannot be
	// copied.
	MakeTemplate(ctx context.Context, srv *Server, name string) error
	// CloneDatabases creates each of names from template, over one
	// connection, calling made after each.
	CloneDatabases(ctx context.Context, srv *Server, template string, names []string, made func(name string)) error
	// DropDatabases drops each of names (gone already: not an error),
	// breaking its connections, over one connection; a name that fails
	// does not stop the others.
	DropDatabases(ctx context.Context, srv *Server, names []string) error
	// CloseDatabases breaks the connections of each of names and refuses
	// new ones: quick, for databases to be dropped later.
	CloseDatabases(ctx context.Context, srv *Server, names []string) error
	// SwapDatabase breaks name's connections, renames it to trash (for
	// the caller to drop later) and renames with to name: a database
	// reset in the time of two renames.
	SwapDatabase(ctx context.Context, srv *Server, name, with, trash string) error
	// ConnTo says how clients reach database name on srv.
	ConnTo(srv *Server, name string) Conn
}

// ArtifactChecker is implemented by engines that can tell whether a data
// dir made elsewhere (a pulled or imported golden) tells its server to
// run commands or load code when it starts: recovery or archive commands,
// preloaded libraries, included config files. files are every entry of
// the data dir (relative paths); read returns a regular file's content
// and fails for anything else. A golden
// that does is refused before it is published: an artifact is data.
type ArtifactChecker interface {
	CheckArtifact(files []string, read func(rel string) ([]byte, error)) error
}
