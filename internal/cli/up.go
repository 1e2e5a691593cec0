package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

type upFlags struct {
	file     string
	backend  string
	noDaemon bool
	noWarm   bool
}

func (f *upFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().StringVar(&f.backend, "backend", "auto", "clone backend: "+backend.Choices())
	cmd.Flags().BoolVar(&f.noDaemon, "no-daemon", false, "do not use a running `dbfork serve`; clone and start here")
	cmd.Flags().BoolVar(&f.noWarm, "no-warm", false, "do not read a reflink or btrfs clone into the page cache in the background once it is ready (also: [pool] prewarm = false)")
}

// leased is an instance obtained either from a running `dbfork serve`
// (a warm one, in milliseconds) or made by this process.
type leased struct {
	s      *store.Store // set for local instances
	id     string
	env    map[string]string
	local  *instance.Instance // nil: leased from the daemon
	client *api.Client
	lease  *api.Lease // what the daemon said: all a client needs
}

// view describes the instance for output: from its state record when it
// is ours, from the lease alone when the daemon made it (its state file
// is the daemon's, and may be unreadable to us).
func (l *leased) view() instance.View {
	if l.local != nil {
		return l.local.State.Public()
	}
	return leaseView(l.lease)
}

// leaseView turns a lease into the view `up` and `ls` print.
func leaseView(l *api.Lease) instance.View {
	return instance.View{
		ID: l.ID, Golden: l.Golden, Engine: l.Engine, Backend: l.Backend, Status: "ready",
		DSN: l.DSN, SocketDSN: l.SocketDSN, Env: l.Env, Dir: l.InstanceDir,
		Log: filepath.Join(l.InstanceDir, "server.log"), Created: l.Leased, ReadyMs: l.ReadyMs,
		LeasedBy: l.HolderPID, Detached: l.Kept,
	}
}

// obtain gets an instance for `run`/`up`: from the store's daemon when
// one answers, else by building and cloning here.
func obtain(ctx context.Context, g *globals, f upFlags) (*leased, error) {
	if !f.noDaemon {
		// Only the socket's path is needed to ask the daemon: the store is
		// opened (created, its server user resolved) only when we clone here.
		root, err := g.storeRoot()
		if err != nil {
			return nil, err
		}
		c, err := api.Dial(ctx, api.SocketPath(root))
		if err == nil {
			abs, err := project.RecipePath(f.file)
			if err != nil {
				return nil, err
			}
			l, err := c.Acquire(ctx, api.AcquireRequest{Recipe: abs, Backend: f.backend, Env: api.Environ()})
			if err != nil {
				return nil, err
			}
			g.log.Info("leased from dbfork serve", "id", l.ID, "acquire_ms", l.AcquireMs)
			return &leased{id: l.ID, env: l.Env, client: c, lease: l}, nil
		}
		if !errors.Is(err, api.ErrNoDaemon) {
			g.log.Warn("ignoring dbfork serve", "err", err)
		}
	}
	s, in, err := startInstance(ctx, g, f)
	if err != nil {
		return nil, err
	}
	return &leased{s: s, id: in.State.ID, env: in.State.ClientEnv(), local: in}, nil
}

// done stops and removes the instance (the daemon does it in the
// background for leases).
func (l *leased) done(ctx context.Context) error {
	if l.local != nil {
		return l.local.Destroy(ctx, l.s)
	}
	return l.client.Release(ctx, l.id)
}

// keep hands the instance over to the user: it runs until `dbfork down`.
func (l *leased) keep(ctx context.Context) error {
	if l.local != nil {
		if err := l.local.Detach(); err != nil {
			return err
		}
		l.local.Release()
		return nil
	}
	_, err := l.client.Keep(ctx, l.id)
	return err
}

// startInstance builds (or reuses) the recipe's golden and starts an
// instance on a clone of it.
func startInstance(ctx context.Context, g *globals, f upFlags) (*store.Store, *instance.Instance, error) {
	r, err := loadRecipe(f.file)
	if err != nil {
		return nil, nil, err
	}
	s, err := g.openOwnStore()
	if err != nil {
		return nil, nil, err
	}
	p := g.project(s, registryFlags{})
	b, err := p.Golden(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	// Only the daemon hands out slots (one per fresh call): here they are
	// closed, and their files left out of the golden's check.
	in, err := p.Clone(ctx, b, instance.Options{Backend: f.backend, CloseSlots: true})
	if err != nil {
		return nil, nil, err
	}
	g.log.Info("instance ready", "id", in.State.ID, "backend", in.State.Backend, "why", in.State.BackendWhy,
		"clone_ms", in.State.CloneMs, "ready_ms", in.State.ReadyMs)
	if r.Pool.Prewarm && !f.noWarm {
		// Off the ready path: the instance is handed out now.
		if started, err := in.WarmInBackground(s); err != nil {
			g.log.Warn("clone not read ahead", "err", err)
		} else if started {
			g.log.Debug("reading the clone in the background", "log", filepath.Join(in.State.Dir, instance.WarmLog))
		}
	}
	return s, in, nil
}

func newUpCmd(g *globals) *cobra.Command {
	var f upFlags
	var asJSON, export bool
	cmd := &cobra.Command{
		Use:   "up [-f dbfork.toml] [--backend B]",
		Short: "Clone the golden, start a server on it, print its id, DSN and environment; it runs until `dbfork down`",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			l, err := obtain(ctx, g, f)
			if err != nil {
				return err
			}
			// Kept only once the user has the id: an `up` killed before
			// printing leaves a leftover that gc (or the daemon) removes.
			v := l.view()
			v.Detached, v.LeasedBy = true, 0
			if asJSON {
				err = printJSON(g.stdout, v)
			} else {
				why := ""
				if v.BackendWhy != "" {
					why = " (" + v.BackendWhy + ")"
				}
				fmt.Fprintf(g.stdout, "# dbfork instance %s: %s on %s clone%s, ready in %.0f ms; stop it with `dbfork down %s`\n",
					v.ID, v.Engine, v.Backend, why, v.ReadyMs, v.ID)
				if v.WholeFileCopyUp {
					fmt.Fprintln(g.stdout, "# "+firstWriteTrap+" (docs/rootless.md)")
				}
				writeEnv(g.stdout, l.env, export)
			}
			if err == nil {
				err = l.keep(ctx)
			}
			if err != nil {
				_ = l.done(context.Background())
				return err
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&export, "export", false, "prefix env lines with `export` (for eval)")
	return cmd
}

func writeEnv(w io.Writer, env map[string]string, export bool) {
	prefix := ""
	if export {
		prefix = "export "
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s=%s\n", prefix, k, shellQuote(env[k]))
	}
	if dir := env[engine.ClientBinEnv]; dir != "" && export {
		// The server's matching clients (a fetched build) come first.
		fmt.Fprintf(w, "export PATH=%s:\"$PATH\"\n", shellQuote(dir))
	}
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
