package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/instance"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/store"
)

type upFlags struct {
	file    string
	backend string
}

func (f *upFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&f.file, "file", "f", "", "recipe file (default ./dbfork.toml)")
	cmd.Flags().StringVar(&f.backend, "backend", "auto", "clone backend: auto, btrfs, reflink, overlay or copy")
}

// startInstance builds (or reuses) the recipe's golden and starts an
// instance on a clone of it.
func startInstance(ctx context.Context, g *globals, f upFlags) (*store.Store, *instance.Instance, error) {
	r, err := loadRecipe(f.file)
	if err != nil {
		return nil, nil, err
	}
	s, err := g.openStore()
	if err != nil {
		return nil, nil, err
	}
	eng, err := openEngine(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	res, err := golden.Build(ctx, s, eng, r, golden.Options{Progress: progress.New(g.stderr), Log: g.log})
	if err != nil {
		return nil, nil, err
	}
	in, err := instance.Create(ctx, s, eng, res.Golden, instance.Options{Backend: f.backend, Settings: r.Settings})
	if err != nil {
		return nil, nil, err
	}
	g.log.Info("instance ready", "id", in.State.ID, "backend", in.State.Backend, "why", in.State.BackendWhy,
		"clone_ms", in.State.CloneMs, "ready_ms", in.State.ReadyMs)
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
			s, in, err := startInstance(cmd.Context(), g, f)
			if err != nil {
				return err
			}
			// Detached only once the user has the id: an `up` killed before
			// printing leaves a leftover that gc removes.
			st := in.State
			st.Detached = true
			if asJSON {
				err = printJSON(g.stdout, st.Public())
			} else {
				fmt.Fprintf(g.stdout, "# dbfork instance %s: %s on %s clone (%s), ready in %.0f ms; stop it with `dbfork down %s`\n",
					st.ID, st.Engine, st.Backend, st.BackendWhy, st.ReadyMs, st.ID)
				writeEnv(g.stdout, st.ID, st.Conn, export)
			}
			if err == nil {
				err = in.Detach()
			}
			if err != nil {
				_ = in.Destroy(context.Background(), s)
				return err
			}
			in.Release()
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&export, "export", false, "prefix env lines with `export` (for eval)")
	return cmd
}

func writeEnv(w io.Writer, id string, c *engine.Conn, export bool) {
	prefix := ""
	if export {
		prefix = "export "
	}
	env := map[string]string{"DBFORK_INSTANCE": id}
	for k, v := range c.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s=%s\n", prefix, k, shellQuote(env[k]))
	}
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
