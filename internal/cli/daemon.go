package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/proc"
)

// DefaultIdle is how long a daemon started on demand stays without calls
// and leases before it stops every instance and exits.
const DefaultIdle = 30 * time.Second

// defaultIdle is $DBFORK_DAEMON_IDLE when it is a duration, else
// DefaultIdle: test runners start daemons without flags, so this is how a
// user (or a test) sets how long one lingers.
func defaultIdle() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("DBFORK_DAEMON_IDLE")); err == nil && d >= 0 {
		return d
	}
	return DefaultIdle
}

// daemonInfo is what `dbfork daemon start|status --json` prints: all a
// client needs to reach the API (docs/api.md, "Finding the daemon").
type daemonInfo struct {
	Socket  string `json:"socket"`
	Store   string `json:"store"`
	PID     int    `json:"pid"`
	Started bool   `json:"started"`
}

func newDaemonCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon start|status|stop",
		Short: "Make sure a `dbfork serve` runs for the store (started on demand, leaves when idle), show it, or stop it",
		Args:  noArgs,
	}
	var asJSON, allowUsers bool
	var idle, wait time.Duration
	start := &cobra.Command{
		Use:   "start [--idle 30s] [--json]",
		Short: "Start a daemon for the store unless one answers; wait until it does; print its socket",
		Long: `start is what test runners call before they ask for leases: when a daemon
already answers on STORE/dbfork.sock it only prints where; otherwise it
starts ` + "`dbfork serve --idle`" + ` in the background (its own session, log in
STORE/logs/serve.log) and waits until it answers. When several start at
once, one daemon wins and serves them all. The daemon leaves by itself
after --idle without calls and leases, stopping every instance it made.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := ensureDaemon(cmd.Context(), g, idle, wait, allowUsers)
			if err != nil {
				return err
			}
			return printDaemon(g, info, asJSON)
		},
	}
	start.Flags().DurationVar(&idle, "idle", defaultIdle(), "the started daemon exits after this long without calls and leases (0: never; default $DBFORK_DAEMON_IDLE or 30s)")
	start.Flags().BoolVar(&allowUsers, "allow-users", false, "a daemon started now also serves users other than the one starting it (serve --allow-users)")
	start.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the daemon to answer")
	status := &cobra.Command{
		Use:   "status [--json]",
		Short: "Say whether a daemon serves the store (exit 3 when none does)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := g.storeRoot()
			if err != nil {
				return err
			}
			sock := api.SocketPath(root)
			h, err := health(cmd.Context(), sock)
			if err != nil {
				return err
			}
			return printDaemon(g, &daemonInfo{Socket: sock, Store: root, PID: h.PID}, asJSON)
		},
	}
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop the store's daemon (it stops and removes every instance it made) and wait until it is gone",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return stopDaemon(cmd.Context(), g)
		},
	}
	for _, c := range []*cobra.Command{start, status} {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	}
	cmd.AddCommand(start, status, stop)
	return cmd
}

func printDaemon(g *globals, info *daemonInfo, asJSON bool) error {
	if asJSON {
		return printJSON(g.stdout, info)
	}
	how := "running"
	if info.Started {
		how = "started"
	}
	fmt.Fprintf(g.stdout, "%s (dbfork serve pid %d, %s, store %s)\n", info.Socket, info.PID, how, info.Store)
	return nil
}

// storeRoot is the store's absolute path, without creating anything.
func (g *globals) storeRoot() (string, error) {
	root, err := g.locateStore()
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", errs.Invalid("store %s: %w", root, err)
	}
	return abs, nil
}

// health asks the daemon at sock who it is; NotFound when none answers.
func health(ctx context.Context, sock string) (*api.Health, error) {
	return ask(ctx, sock, false)
}

// ask is health, counting as a use of the daemon when touch is set.
func ask(ctx context.Context, sock string, touch bool) (*api.Health, error) {
	c, err := api.Dial(ctx, sock)
	if errors.Is(err, api.ErrNoDaemon) {
		return nil, errs.NotFound("no dbfork daemon answers on %s (start one: dbfork daemon start)", sock)
	}
	if err != nil {
		return nil, err
	}
	if touch {
		return c.Touch(ctx)
	}
	return c.Health(ctx)
}

// ensureDaemon returns the daemon serving the store, starting one if none
// answers. Racing starters are fine: `serve` holds STORE/locks/serve.lock,
// so all but one of the daemons they start exit with a conflict, and every
// starter waits for whichever one won.
func ensureDaemon(ctx context.Context, g *globals, idle, wait time.Duration, allowUsers bool) (*daemonInfo, error) {
	root, err := g.storeRoot()
	if err != nil {
		return nil, err
	}
	sock := api.SocketPath(root)
	h, err := ask(ctx, sock, true)
	if err == nil {
		if err := checkAPI(sock, h); err != nil {
			return nil, err
		}
		return &daemonInfo{Socket: sock, Store: root, PID: h.PID}, nil
	}
	if errors.Is(err, errs.ErrForbidden) {
		return nil, err // a daemon runs and will not serve us: say why
	}
	s, err := g.openStore()
	if err != nil {
		if os.Geteuid() != 0 && errors.Is(err, os.ErrPermission) {
			return nil, errs.Unsupported("no dbfork daemon serves %s, and it is not your store: use a store of your own (set up once with `sudo dbfork store init --user $USER`) (%w)", root, err)
		}
		return nil, err
	}
	logFile := filepath.Join(s.Root, "logs", "serve.log")
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		child, err := spawnServe(s.Root, logFile, idle, allowUsers)
		if err != nil {
			return nil, err
		}
		info, again, err := awaitDaemon(ctx, sock, child, logFile)
		if err != nil || !again {
			if info != nil {
				info.Store = root
			}
			return info, err
		}
		// Another daemon held the lock and has gone since (it was leaving
		// when we looked): start ours again.
	}
}

// spawnServe starts `dbfork serve --idle` in its own session, detached
// from our terminal and our process group, its output in logFile.
func spawnServe(root, logFile string, idle time.Duration, allowUsers bool) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the dbfork binary: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return nil, err
	}
	lf, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "--- %s: dbfork daemon start (pid %d)\n", time.Now().Format(time.RFC3339), os.Getpid())
	cmd := exec.Command(self, "--store", root, "serve", "--idle", idle.String())
	if allowUsers {
		cmd.Args = append(cmd.Args, "--allow-users")
	}
	cmd.Env = daemonEnv()
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dbfork serve: %w", err)
	}
	return cmd, nil
}

// daemonEnv is our environment without the connection settings of some
// database a test runner may have exported: the daemon outlives the run.
func daemonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "DATABASE_URL" || engine.ClientVar(k) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// awaitDaemon waits until a daemon answers on sock. again is true when our
// child lost the race for the store to a daemon that then left.
func awaitDaemon(ctx context.Context, sock string, child *exec.Cmd, logFile string) (info *daemonInfo, again bool, err error) {
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	childGone := false
	for {
		if c, err := api.Dial(ctx, sock); err == nil {
			if h, err := c.Touch(ctx); err == nil {
				return &daemonInfo{Socket: sock, PID: h.PID, Started: h.PID == child.Process.Pid}, false, nil
			}
		}
		select {
		case <-ctx.Done():
			if !childGone {
				_ = child.Process.Signal(syscall.SIGTERM)
			}
			return nil, false, errs.Unsupported("no dbfork daemon answered on %s in time; see %s", sock, logFile)
		case err := <-exited:
			childGone = true
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == errs.ExitConflict {
				// Another daemon holds the store; wait for its socket, or
				// start again if it turns out to be leaving.
				if _, herr := api.Dial(ctx, sock); errors.Is(herr, api.ErrNoDaemon) {
					return nil, true, nil
				}
				continue
			}
			return nil, false, fmt.Errorf("dbfork serve exited at start (%v): %s", err, lastLine(logFile))
		case <-tick.C:
		}
	}
}

// lastLine is the last non-empty line of a log, for a one-line error.
func lastLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "see " + path
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.TrimSpace(lines[len(lines)-1]) + " (log: " + path + ")"
}

// stopDaemon sends SIGTERM to the store's daemon and waits until it has
// stopped its instances (its serve.lock is free) and its process is gone:
// the lock is let go a moment before the exit, and until then the
// process still holds its log and directories open in the store, so a
// caller that unmounts the store right after would find it busy.
func stopDaemon(ctx context.Context, g *globals) error {
	root, err := g.storeRoot()
	if err != nil {
		return err
	}
	sock := api.SocketPath(root)
	h, err := health(ctx, sock)
	if err != nil {
		return err
	}
	id, err := proc.Of(h.PID)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		id = proc.Identity{} // gone already; only the lock is left to watch
	} else if err != nil {
		return fmt.Errorf("stop dbfork serve pid %d: %w", h.PID, err)
	} else if err := id.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop dbfork serve pid %d: %w", h.PID, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	lock := filepath.Join(root, "locks", "serve.lock")
	for lockfile.Held(lock) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return id.Wait(ctx)
}
