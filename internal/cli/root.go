// Package cli holds dbfork's subcommands. Each file is one command; the
// work happens in the internal packages they call.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// globals are the flags every command shares.
type globals struct {
	store   string
	verbose bool
	offline bool // no engine downloads
	log     *slog.Logger
	stdout  io.Writer
	stderr  io.Writer
}

// Main runs dbfork with args and returns the exit code.
func Main(args []string) int {
	g := &globals{stdout: os.Stdout, stderr: os.Stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetOut(g.stdout)
	root.SetErr(g.stderr)
	// SIGINT/SIGTERM cancel the context, so every command can clean up
	// (`run` handles them itself, to pass them to its child first).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Under sudo, recipe `run` steps run as the user who typed the command.
	err := root.ExecuteContext(caller.With(ctx, sudoCaller))
	if err == nil {
		return 0
	}
	var ex exitError
	if errors.As(err, &ex) {
		return ex.code
	}
	fmt.Fprintln(g.stderr, "dbfork: "+err.Error())
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return errs.ExitCode(err)
}

// exitError carries a child's exit status out of `run` without a message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "dbfork",
		Short: "Instant copy-on-write clones of seeded test databases",
		Long: `dbfork builds a "golden" data directory once from a recipe (dbfork.toml)
and gives every test run its own writable copy-on-write clone of it, with a
real PostgreSQL server running on it, in milliseconds.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			level := slog.LevelWarn
			if g.verbose {
				level = slog.LevelDebug
			}
			g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
		},
	}
	root.PersistentFlags().StringVar(&g.store, "store", "", "store directory (default $DBFORK_STORE, /var/lib/dbfork as root, else your store made by `sudo dbfork store init --user`, else $XDG_DATA_HOME/dbfork)")
	root.PersistentFlags().BoolVarP(&g.verbose, "verbose", "v", false, "log what dbfork does to stderr")
	root.PersistentFlags().BoolVar(&g.offline, "offline", false, "never download server builds into the engine cache (also DBFORK_OFFLINE=1)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return errs.Invalid("%w (see `%s --help`)", err, c.CommandPath())
	})
	root.AddCommand(newBuildCmd(g), newUpCmd(g), newLsCmd(g), newDownCmd(g), newRunCmd(g),
		newDoctorCmd(g), newGCCmd(g), newStoreCmd(g), newServeCmd(g), newDaemonCmd(g), newBenchCmd(g), newInspectCmd(g), newVerifyCmd(g), newEngineCmd(g),
		newPushCmd(g), newPullCmd(g), newExportCmd(g), newImportCmd(g), newResetCmd(g), newPinCmd(g), newVersionCmd(g))
	return root
}

// StoreFSEnv opts out of putting a new store on an XFS image of its own:
// DBFORK_STORE_FS=plain (the same as `dbfork store init --fs plain`).
const StoreFSEnv = "DBFORK_STORE_FS"

// CowExtSizeEnv overrides the XFS copy-on-write extent size hint of new
// instance dirs, in bytes (0: the filesystem's default); for measuring.
const CowExtSizeEnv = "DBFORK_XFS_COWEXTSIZE"

func (g *globals) openStore() (*store.Store, error) {
	auto := true
	switch v := os.Getenv(StoreFSEnv); v {
	case "", "auto":
	case "plain":
		auto = false
	default:
		return nil, errs.Invalid("%s=%q: use auto (the default) or plain", StoreFSEnv, v)
	}
	root, err := g.storeRoot()
	if err != nil {
		return nil, err
	}
	s, err := store.OpenWith(root, store.Options{AutoImage: auto, CowExtSize: store.CowExtSizeSetting(os.LookupEnv(CowExtSizeEnv)), Notify: func(msg string) {
		fmt.Fprintln(g.stderr, "dbfork: "+msg)
	}})
	if err == nil {
		engine.SetProbeCache(filepath.Join(s.CacheDir(), "probes.json"))
	}
	return s, err
}

func loadRecipe(path string) (*project.Recipe, error) {
	// Under sudo, read and expand it as the user behind sudo.
	return project.LoadRecipe(caller.With(context.Background(), sudoCaller), path)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// noArgs rejects positional arguments with a usable message.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return errs.Invalid("%s takes no arguments, got %q (see `%s --help`)", cmd.Name(), strings.Join(args, " "), cmd.CommandPath())
	}
	return nil
}

// sudoCaller is the user who ran this root process through sudo, or nil:
// SUDO_UID and SUDO_GID are read here, at the edge.
func sudoCaller() *caller.Caller {
	return caller.Sudo(os.Getenv("SUDO_UID"), os.Getenv("SUDO_GID"))
}
