package cli_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// removeGolden deletes a published golden (tests only: dbfork keeps
// goldens until told otherwise).
func removeGolden(t *testing.T, e *env, key string) {
	dir := filepath.Join(e.store, "goldens", key)
	if err := fsutil.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(e.store, "cache", "hashes.json"))
}
