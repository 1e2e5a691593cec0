package dbforktest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dbfork/dbfork/dbforktest"
	"github.com/dbfork/dbfork/internal/api"
)

// contract is clients/contract.json: the variables every client honours
// and the cases one test per client checks (docs/api.md).
type contract struct {
	Backends  []string `json:"backends"`
	LeaseMode string   `json:"lease_mode"`
	Cases     []struct {
		Name   string            `json:"name"`
		Env    map[string]string `json:"env"`
		Option map[string]string `json:"option"`
		Want   struct {
			Backend string `json:"backend"`
			Leased  bool   `json:"leased"`
		} `json:"want"`
	} `json:"cases"`
}

// The Go helper against the shared contract: the recipe and backend come
// from the environment when no argument names them, an argument beats
// the environment, and the lease's own database is reported as the mode
// every client uses. (Go's API takes a recipe argument but no backend
// option, so the explicit-backend case has nothing to check here.)
func TestClientContract(t *testing.T) {
	data, err := os.ReadFile("../clients/contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if c.LeaseMode != dbforktest.ModeLease || !slices.Contains(c.Backends, "userns-overlay") {
		t.Fatalf("contract lease mode %q / backends %v; dbforktest says %q", c.LeaseMode, c.Backends, dbforktest.ModeLease)
	}
	storeDir, recipe := setup(t)
	startDaemon(t, storeDir)
	t.Setenv("DBFORK_SOCKET", api.SocketPath(storeDir))
	missing := filepath.Join(filepath.Dir(recipe), "missing", "dbfork.toml")
	for _, k := range c.Cases {
		t.Run(k.Name, func(t *testing.T) {
			if k.Option["backend"] != "" {
				return // no backend option in Go's API: the environment is the way
			}
			for name, v := range k.Env {
				switch v {
				case "@recipe":
					v = recipe
				case "@missing":
					v = missing
				}
				t.Setenv(name, v)
			}
			arg := recipe // the recipe as an argument, unless the case is about where it comes from
			if k.Env["DBFORK_RECIPE"] != "" && k.Option["recipe"] == "" {
				arg = ""
			}
			in := dbforktest.Open(t, arg)
			if in.Mode != c.LeaseMode {
				t.Errorf("mode %q, want %q", in.Mode, c.LeaseMode)
			}
			if k.Want.Backend != "" && in.Backend != k.Want.Backend {
				t.Errorf("backend %q, want %q", in.Backend, k.Want.Backend)
			}
			if k.Want.Leased && in.DSN == "" {
				t.Error("no lease")
			}
		})
	}
}
