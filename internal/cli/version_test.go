package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
)

func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	g := &globals{stdout: &out, stderr: &out}
	root := newRoot(g)
	root.SetArgs([]string{"version"})
	root.SetOut(&out)
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "dbfork "+api.Version()+" (api 1,") {
		t.Fatalf("dbfork version printed %q", out.String())
	}
}

// A daemon left running by another dbfork that speaks another API
// version is refused with one line saying how to get rid of it.
func TestDaemonOfAnotherAPIVersionIsRefused(t *testing.T) {
	if err := checkAPI("/s.sock", &api.Health{API: api.APIVersion}); err != nil {
		t.Fatalf("same version refused: %v", err)
	}
	err := checkAPI("/s.sock", &api.Health{API: 0})
	if !errors.Is(err, errs.ErrConflict) || !strings.Contains(err.Error(), "dbfork daemon stop") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("old daemon: %v, want one conflict line naming dbfork daemon stop", err)
	}
}
