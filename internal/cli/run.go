package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
)

func newRunCmd(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "run [-f dbfork.toml] [--backend B] -- CMD [ARGS...]",
		Short: "Run CMD against its own instance (DATABASE_URL, PG* exported); remove the instance when CMD ends; exit with CMD's status",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errs.Invalid("run needs a command after --, e.g. dbfork run -- psql -c 'select 1'")
			}
			if _, err := exec.LookPath(args[0]); err != nil {
				return errs.NotFound("command %q not found on PATH", args[0])
			}
			// Watch signals ourselves: they go to the child first, and the
			// instance is removed only after the child has exited.
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer signal.Stop(sigs)

			l, err := obtain(cmd.Context(), g, f)
			if err != nil {
				return err
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := l.done(ctx); err != nil {
					g.log.Error("remove instance", "id", l.id, "err", err)
				}
			}()
			faults.At("run:ready")
			child := exec.Command(engine.ClientCommand(args[0], l.env), args[1:]...)
			child.Stdin, child.Stdout, child.Stderr = os.Stdin, g.stdout, g.stderr
			child.Env = engine.WithClientPath(os.Environ(), l.env)
			if err := child.Start(); err != nil {
				return err
			}
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()
			faults.At("run:child")
			for {
				select {
				case sig := <-sigs:
					_ = child.Process.Signal(sig)
					continue
				case err := <-done:
					return childStatus(err)
				}
			}
		},
	}
	f.add(cmd)
	return cmd
}

// childStatus turns the child's end into dbfork's exit status: its code,
// or 128+signal as shells report it.
func childStatus(err error) error {
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitError{code: 128 + int(ws.Signal())}
	}
	return exitError{code: ee.ExitCode()}
}
