package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/oci"
	"github.com/dbfork/dbfork/internal/progress"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// Environment read for registries (here, at the edge, only).
const (
	RegistryUserEnv      = "DBFORK_REGISTRY_USER"
	RegistryPasswordEnv  = "DBFORK_REGISTRY_PASSWORD"
	RegistryPlainHTTPEnv = "DBFORK_REGISTRY_PLAIN_HTTP"
	// RegistryHostEnv names the registries (host[:port], comma-separated)
	// DBFORK_REGISTRY_USER/_PASSWORD are for; no other host gets them.
	RegistryHostEnv = "DBFORK_REGISTRY_HOST"
	// PullMaxEnv caps what a pull or import may declare (oci.DefaultMaxBytes).
	PullMaxEnv = "DBFORK_PULL_MAX"
	// largeFileEnv lowers the one-layer-per-file threshold (bytes), for
	// tests and benchmarks with small data.
	largeFileEnv = "DBFORK_OCI_LARGE_FILE"
)

// registryFlags are the flags every registry command shares.
type registryFlags struct{ plainHTTP bool }

func (f *registryFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.plainHTTP, "plain-http", false, "talk plain HTTP to the registry (loopback registries always are), sending it no credentials; also "+RegistryPlainHTTPEnv+"=1, or ="+"HOST[,HOST] to name hosts that may get credentials over it")
}

// hostList splits a comma- or blank-separated list of registry hosts.
func hostList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}

func (f *registryFlags) registry() oci.Registry {
	plain := os.Getenv(RegistryPlainHTTPEnv)
	r := oci.Registry{
		PlainHTTP:       f.plainHTTP || plain == "1" || plain == "true",
		Username:        os.Getenv(RegistryUserEnv),
		Password:        os.Getenv(RegistryPasswordEnv),
		CredentialHosts: hostList(os.Getenv(RegistryHostEnv)),
	}
	if plain != "1" && plain != "true" && plain != "0" {
		r.PlainHTTPHosts = hostList(plain)
	}
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".docker")
		}
	}
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
			r.DockerConfig = filepath.Join(dir, "config.json")
		}
	}
	return r
}

func packOptions(g *globals) (oci.PackOptions, error) {
	o := oci.PackOptions{}
	if v := os.Getenv(largeFileEnv); v != "" {
		if _, err := fmt.Sscan(v, &o.LargeFile); err != nil || o.LargeFile <= 0 {
			return o, errs.Invalid("%s=%q: give a size in bytes", largeFileEnv, v)
		}
	}
	return o, nil
}

// remote is the [cache] side of builds run by this process.
func (g *globals) remote(s *store.Store, f registryFlags) golden.Remote {
	po, _ := packOptions(g)
	max, _ := pullMax(0)
	return &oci.Remote{Registry: f.registry(), Check: project.EngineCheck(g.openEngine(s)), Pack: po, MaxBytes: max}
}

// peerRemote is the [cache] side of builds a daemon runs for a socket
// peer other than its own user: anonymous, so the daemon's credentials
// (environment, docker config) never go to a registry a peer's recipe
// names.
func (g *globals) peerRemote(s *store.Store) golden.Remote {
	rm := g.remote(s, registryFlags{}).(*oci.Remote)
	rm.Registry = oci.Registry{PlainHTTP: rm.Registry.PlainHTTP}
	return rm
}

// pullMax is the cap on what a pull or import may declare: flag, else
// DBFORK_PULL_MAX, else oci.DefaultMaxBytes.
func pullMax(flag int64) (int64, error) {
	if flag > 0 {
		return flag, nil
	}
	v := os.Getenv(PullMaxEnv)
	if v == "" {
		return oci.DefaultMaxBytes, nil
	}
	n, err := fsutil.ParseSize(v)
	if err != nil || n <= 0 {
		return 0, errs.Invalid("%s=%q: give a size (e.g. 500G)", PullMaxEnv, v)
	}
	return n, nil
}

// findGolden resolves a KEY argument, or the golden of a recipe.
func findGolden(ctx context.Context, g *globals, s *store.Store, keyArg, file string) (*golden.Golden, error) {
	if keyArg != "" {
		return golden.Find(s, keyArg)
	}
	r, err := loadRecipe(file)
	if err != nil {
		return nil, err
	}
	p := g.project(s, registryFlags{})
	eng, err := p.Engine(ctx, r)
	if err != nil {
		return nil, err
	}
	k, err := p.Key(ctx, eng, r)
	if err != nil {
		return nil, err
	}
	gd, err := golden.Lookup(s, k.Key)
	if err != nil {
		return nil, errs.NotFound("the recipe's golden %s is not in the store: run `dbfork build` first", golden.Short(k.Key))
	}
	return gd, nil
}

func newExportCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "export KEY FILE",
		Short: "Write a golden to one file (an OCI image layout tar: the artifact `push` sends)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			gd, err := golden.Find(s, args[0])
			if err != nil {
				return err
			}
			po, err := packOptions(g)
			if err != nil {
				return err
			}
			st, err := oci.Export(cmd.Context(), s, gd, args[1], po)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(g.stdout, map[string]any{"key": gd.Key, "file": args[1], "stats": st})
			}
			fmt.Fprintf(g.stdout, "exported golden %s to %s: %d layers, %s (%s of data)\n",
				golden.Short(gd.Key), args[1], st.Layers, humanBytes(st.Compressed), humanBytes(st.Uncompressed))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newImportCmd(g *globals) *cobra.Command {
	var asJSON bool
	var maxSize sizeFlag
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Read a golden from a file written by `dbfork export` (verified, published atomically)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openStore()
			if err != nil {
				return err
			}
			o, err := g.unpackOptions(s, maxSize)
			if err != nil {
				return err
			}
			res, err := oci.Import(cmd.Context(), s, args[0], o)
			if err != nil {
				return err
			}
			return g.printUnpacked(res, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	maxSize.add(cmd)
	return cmd
}

// sizeFlag is --max-size of pull and import.
type sizeFlag struct{ v string }

func (f *sizeFlag) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.v, "max-size", "", "refuse a golden whose files add up to more (default 256G; also "+PullMaxEnv+")")
}

func (g *globals) unpackOptions(s *store.Store, f sizeFlag) (oci.UnpackOptions, error) {
	var flag int64
	if f.v != "" {
		n, err := fsutil.ParseSize(f.v)
		if err != nil || n <= 0 {
			return oci.UnpackOptions{}, errs.Invalid("--max-size %q: give a size (e.g. 500G)", f.v)
		}
		flag = n
	}
	max, err := pullMax(flag)
	if err != nil {
		return oci.UnpackOptions{}, err
	}
	return oci.UnpackOptions{
		Check: project.EngineCheck(g.openEngine(s)), Log: g.log, MaxBytes: max,
		OnWait: func() { fmt.Fprintln(g.stderr, "dbfork: waiting for another pull or build of the same golden") },
	}, nil
}

func (g *globals) printUnpacked(res *oci.Unpacked, asJSON bool) error {
	if asJSON {
		return printJSON(g.stdout, res)
	}
	fmt.Fprintln(g.stdout, res.Key)
	return nil
}

// buildOptions are golden.Build's options for a command: progress on
// stderr, and the recipe's [cache] through the registries.
func (g *globals) buildOptions(s *store.Store, f registryFlags) golden.Options {
	return golden.Options{
		Progress: progress.New(g.stderr), Log: g.log, Remote: g.remote(s, f),
		Warn: func(msg string) { fmt.Fprintln(g.stderr, "dbfork: "+msg) },
		// A bad value is refused by `dbfork build`; elsewhere: the default.
		StepCacheMin: stepCacheMinEnv(),
	}
}

// project is how this command gets from recipes to goldens and clones:
// the store's engines and the build options above.
func (g *globals) project(s *store.Store, f registryFlags) *project.Project {
	return project.New(project.Options{Store: s, Open: g.openEngine(s), Build: g.buildOptions(s, f)})
}

// peerScoped is a daemon's [cache]: builds asked for by a unix-socket
// peer other than the daemon's own user use peer (no credentials of the
// daemon's); its own user, `serve -f` and TCP callers (who showed the
// token only the daemon's user can read) use own.
type peerScoped struct{ own, peer golden.Remote }

func (p peerScoped) pick(ctx context.Context) golden.Remote {
	if ownCredentials(api.PeerFrom(ctx)) {
		return p.own
	}
	return p.peer
}

func ownCredentials(p api.Peer, inRequest bool) bool {
	return !inRequest || !p.Unix || p.UID == os.Geteuid()
}

func (p peerScoped) Fetch(ctx context.Context, s *store.Store, key, repo string) (bool, error) {
	return p.pick(ctx).Fetch(ctx, s, key, repo)
}

func (p peerScoped) Send(ctx context.Context, s *store.Store, g *golden.Golden, repo string) error {
	return p.pick(ctx).Send(ctx, s, g, repo)
}

// daemonRemote is the [cache] of `dbfork serve`.
func (g *globals) daemonRemote(s *store.Store) golden.Remote {
	return peerScoped{own: g.remote(s, registryFlags{}), peer: g.peerRemote(s)}
}
