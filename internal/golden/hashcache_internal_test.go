package golden

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

// Only a missing input is "not found"; any other stat failure says what
// it was (issue 13: EACCES used to read as "not found").
func TestHashCacheSaysWhyAnInputFailed(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "seed.sql")
	if err := os.WriteFile(f, []byte("select 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (*HashCache)(nil).Sum(filepath.Join(dir, "nope.sql")); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("missing input: %v, want not found", err)
	}
	_, _, err := (*HashCache)(nil).Sum(filepath.Join(f, "x"))
	if err == nil || errors.Is(err, errs.ErrNotFound) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("input under a file: %v, want the real reason, not 'not found'", err)
	}
	if sum, size, err := (*HashCache)(nil).Sum(f); err != nil || size != 10 || len(sum) != 64 {
		t.Errorf("readable input: %q %d %v", sum, size, err)
	}
}
