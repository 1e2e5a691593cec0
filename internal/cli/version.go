package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
)

// versionInfo is what `dbfork version --json` prints.
type versionInfo struct {
	Version string `json:"version"`
	API     int    `json:"api"`
	Go      string `json:"go"`
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

func newVersionCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print dbfork's version and the API version its daemon and clients speak",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			v := versionInfo{Version: api.Version(), API: api.APIVersion, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
			if asJSON {
				return printJSON(g.stdout, v)
			}
			fmt.Fprintf(g.stdout, "dbfork %s (api %d, %s, %s/%s)\n", v.Version, v.API, v.Go, v.OS, v.Arch)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// checkAPI refuses a daemon that speaks another API version than this
// binary: an older daemon left running by an earlier install would
// otherwise misread requests halfway through a test run.
func checkAPI(sock string, h *api.Health) error {
	if h.API == api.APIVersion {
		return nil
	}
	return errs.Conflict("the dbfork daemon on %s speaks API version %d (dbfork %s) but this dbfork %s speaks %d: stop it with `dbfork daemon stop` and run again",
		sock, h.API, orUnknown(h.Version), api.Version(), api.APIVersion)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
