package backend_test

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
)

func mkdirPlain(p string) error { return os.Mkdir(p, 0o700) }

func hostFS(t *testing.T, p string) string {
	fs, err := fsutil.FSType(p)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
