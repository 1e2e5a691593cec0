package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/daemon"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
)

func newServeCmd(g *globals) *cobra.Command {
	var tcp, backendName string
	var recipes []string
	var idle, poolIdle time.Duration
	var allowUsers bool
	cmd := &cobra.Command{
		Use:   "serve [-f dbfork.toml]... [--tcp 127.0.0.1:PORT]",
		Short: "Keep warm pools of instances and lease them over a local HTTP/JSON API (STORE/dbfork.sock)",
		Long: `serve runs until SIGINT/SIGTERM, then stops and removes every instance it
made. The API listens on the unix socket STORE/dbfork.sock (mode 0600)
and serves the user who runs serve (and root). As root it serves root
only: other users get a store of their own (sudo dbfork store init --user
NAME). With --allow-users it serves every user who can reach the socket,
which it gives to the user behind sudo: it builds their recipes and runs
their commands as them (docs/security.md, "Who may use the API"). With
--tcp it also listens on a loopback port, where every call needs the
bearer token written to STORE/api-token.
-f warms the pool of a recipe at start. With --idle it also leaves by itself
once no call has come for that long and nothing is leased (what
` + "`dbfork daemon start`" + ` uses). See docs/api.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return serve(cmd.Context(), g, recipes, backendName, tcp, idle, poolIdle, allowUsers)
		},
	}
	cmd.Flags().StringArrayVarP(&recipes, "file", "f", nil, "recipe whose pool to warm at start (repeatable)")
	cmd.Flags().StringVar(&backendName, "backend", "auto", "clone backend of the pools warmed with -f")
	cmd.Flags().StringVar(&tcp, "tcp", "", "also listen on this loopback address (e.g. 127.0.0.1:7420), token required")
	cmd.Flags().DurationVar(&idle, "idle", 0, "exit after this long with no API call and nothing leased (0: run until stopped)")
	cmd.Flags().BoolVar(&allowUsers, "allow-users", false, "serve users other than the one running serve (as root: every user who can reach the socket, which goes to the user behind sudo)")
	cmd.Flags().DurationVar(&poolIdle, "pool-idle", 10*time.Minute, "close a pool (and its warm instances) nobody leased from for this long (0: never)")
	return cmd
}

func serve(ctx context.Context, g *globals, recipes []string, backendName, tcp string, idle, poolIdle time.Duration, allowUsers bool) error {
	tcpAddr, err := serveArgs(recipes, tcp)
	if err != nil {
		return err
	}
	s, err := g.openOwnStore()
	if err != nil {
		return err
	}
	sock := api.SocketPath(s.Root)
	if len(sock) > 107 {
		return errs.Invalid("socket path %s is %d bytes, over the kernel's 107: use a shorter --store path", sock, len(sock))
	}
	lock, err := lockfile.TryLock(filepath.Join(s.LocksDir(), "serve.lock"))
	if errors.Is(err, lockfile.ErrHeld) {
		return errs.Conflict("a dbfork serve already runs for store %s (socket %s)", s.Root, sock)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	_ = os.Remove(sock) // left by a daemon that was killed: we hold the lock now
	if poolIdle == 0 {
		poolIdle = -1 // never
	}
	spareProcs()
	d := daemon.New(daemon.Options{Store: s, Log: g.log, OpenEngine: g.openEngine(s), Remote: g.daemonRemote(s), PoolIdle: poolIdle, Sudo: sudoCaller(), Urgent: true})
	closeDaemon := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		return d.Close(cctx)
	}
	token := ""
	if tcpAddr != nil {
		token = newToken()
	}
	srv := api.NewServer(d, token, g.log)
	listeners, unlisten, err := listen(s.Root, sock, tcpAddr, token, allowUsers)
	if err != nil {
		_ = closeDaemon()
		return err
	}
	defer unlisten()
	serveErr := make(chan error, len(listeners))
	for _, l := range listeners {
		go func() { serveErr <- srv.Serve(l) }()
	}
	for _, f := range recipes {
		id, err := d.Warm(ctx, f, backendName)
		if err != nil {
			_ = srv.Shutdown(context.Background())
			cerr := closeDaemon()
			if cerr != nil {
				return fmt.Errorf("%w (shutdown: %v)", err, cerr)
			}
			return err
		}
		g.log.Info("warming pool", "recipe", f, "pool", id)
	}
	fmt.Fprintf(g.stderr, "dbfork serve: listening on %s", sock)
	if tcpAddr != nil {
		fmt.Fprintf(g.stderr, " and %s (token in %s)", tcpAddr, filepath.Join(s.Root, api.TokenName))
	}
	fmt.Fprintf(g.stderr, " (pid %d); stop with SIGTERM or Ctrl-C\n", os.Getpid())
	faults.At("serve:listening")
	failed := waitForEnd(ctx, g, srv, d, sock, idle, serveErr)
	g.log.Info("shutting down: stopping every instance")
	// Pools first, so calls waiting for an instance end at once; then the
	// listeners, giving running calls a moment to answer.
	cerr := closeDaemon()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = srv.Shutdown(sctx)
	cancel()
	if failed != nil {
		return failed
	}
	return cerr
}

// spareProcs gives the daemon's Go scheduler more Ps than cores, unless
// GOMAXPROCS says otherwise. The daemon's walks of whole clones (restore,
// clone, the golden's check) run on threads of their own at background
// priority (proc.Niced), each holding a P while it runs; the kernel puts
// such a thread behind the tests' work, and with one P per core two of
// them left the API's goroutines no P until the runtime preempted one
// (10 ms). A no-op call's p99 at 8 test clients on 2 cores: 15.7–17.2 ms
// with 2 Ps, 6.6–9.5 ms with 8 (docs/performance.md, session 19).
func spareProcs() {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 6)
}

// serveArgs checks --tcp (loopback only) and makes the -f recipe paths
// absolute in place.
func serveArgs(recipes []string, tcp string) (*net.TCPAddr, error) {
	var tcpAddr *net.TCPAddr
	if tcp != "" {
		a, err := net.ResolveTCPAddr("tcp", tcp)
		if err != nil || a.IP == nil || !a.IP.IsLoopback() {
			return nil, errs.Invalid("--tcp %q: give a loopback address such as 127.0.0.1:7420 (the API is never exposed beyond this machine)", tcp)
		}
		tcpAddr = a
	}
	for i, f := range recipes {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		recipes[i] = abs
	}
	return tcpAddr, nil
}

// listen opens the API socket (born 0600; with allowUsers given to the
// user behind sudo) behind the gate of who it serves and, with tcpAddr,
// the loopback port and its token file. unlisten removes the socket and
// token file.
func listen(root, sock string, tcpAddr *net.TCPAddr, token string, allowUsers bool) (ls []net.Listener, unlisten func(), err error) {
	var undo []func()
	unlisten = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			unlisten()
		}
	}()
	old := syscall.Umask(0o177) // the socket is born 0600
	ln, err := net.Listen("unix", sock)
	syscall.Umask(old)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	ls = append(ls, gate(ln, allowUsers))
	undo = append(undo, func() { os.Remove(sock) })
	give := chownToInvoker
	if !allowUsers {
		// Without --allow-users a root daemon would refuse the user
		// behind sudo anyway: the socket and token stay root's.
		give = func(string) error { return nil }
	}
	if err := give(sock); err != nil {
		return ls, nil, err
	}
	if tcpAddr == nil {
		return ls, unlisten, nil
	}
	tokenFile := filepath.Join(root, api.TokenName)
	if err := fsutil.WriteFileAtomic(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return ls, nil, err
	}
	undo = append(undo, func() { os.Remove(tokenFile) })
	if err := give(tokenFile); err != nil {
		return ls, nil, err
	}
	tl, err := net.ListenTCP("tcp", tcpAddr)
	if err != nil {
		return ls, nil, fmt.Errorf("listen on %s: %w (is the port taken?)", tcpAddr, err)
	}
	return append(ls, tl), unlisten, nil
}

// waitForEnd blocks until serve must stop: a signal (ctx), a listener
// failing (its error is returned), or the idle time passing with nothing
// leased.
func waitForEnd(ctx context.Context, g *globals, srv *api.Server, d *daemon.Daemon, sock string, idle time.Duration, serveErr <-chan error) error {
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return err
	case <-idleExit(ctx, srv, d, idle):
		// Nobody uses us: stop answering first, so a client arriving now
		// starts a new daemon instead of leasing from one that is leaving.
		g.log.Info("idle: no call and nothing leased", "for", idle)
		_ = os.Remove(sock)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
	}
	return nil
}

// idleExit is closed once the daemon has had no call for idle and holds no
// lease; never when idle is 0.
func idleExit(ctx context.Context, srv *api.Server, d *daemon.Daemon, idle time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	if idle <= 0 {
		return ch
	}
	go func() {
		t := time.NewTicker(min(idle/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if srv.IdleFor() >= idle && d.Health().Leases == 0 {
					close(ch)
					return
				}
			}
		}
	}()
	return ch
}

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// chownToInvoker gives a file to the user who ran `sudo dbfork serve`, so
// their test runs can reach the API without root.
func chownToInvoker(path string) error {
	c := sudoCaller()
	if c == nil {
		return nil
	}
	if err := os.Chown(path, c.UID, c.GID); err != nil {
		return fmt.Errorf("give %s to the invoking user %d: %w", path, c.UID, err)
	}
	return nil
}
