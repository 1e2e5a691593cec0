package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/errs"
)

func TestLongSocketDirIsOneLine(t *testing.T) {
	long := "/tmp/" + strings.Repeat("d", 100) + "/sock"
	_, err := StartOnFreePort(StartSpec{SocketDir: long}, nil, func(int) (*Server, error) {
		t.Fatal("started a server whose socket cannot exist")
		return nil, nil
	})
	if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "shorter path") {
		t.Fatalf("a %d-byte socket dir: %v", len(long), err)
	}
	if err := CheckSocketDir("/var/lib/dbfork/instances/0123abcd/sock"); err != nil {
		t.Fatal(err)
	}
}
