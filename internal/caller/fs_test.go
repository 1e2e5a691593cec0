package caller

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// AsFS opens files with the caller's rights only: root's 0600 file
// is refused to nobody, their own is not, and the rest of the process
// (other goroutines at the same time, and this one afterwards) keeps
// root's rights.
func TestAsFSUsesTheCallersRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root; CI runs it as root")
	}
	// Not testenv (it imports packages above this one): a temp dir that
	// nobody may search, as testenv.Dir makes.
	dir, err := os.MkdirTemp("", "dbfork-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret")
	public := filepath.Join(dir, "public")
	for p, mode := range map[string]os.FileMode{secret: 0o600, public: 0o644} {
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	ctx := With(context.Background(), func() *Caller { return Lookup(65534, 65534) })
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := AsFS(ctx, func() error {
				f, err := os.Open(secret)
				if err == nil {
					f.Close()
				}
				return err
			})
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("nobody opened root's 0600 file: %v", err)
			}
			if err := AsFS(ctx, func() error { _, err := os.ReadFile(public); return err }); err != nil {
				t.Errorf("nobody could not read a public file: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := os.ReadFile(secret); err != nil {
				t.Errorf("root lost its rights while another goroutine acted as nobody: %v", err)
			}
		}()
	}
	wg.Wait()
	if _, err := os.ReadFile(secret); err != nil {
		t.Errorf("root lost its rights after acting as nobody: %v", err)
	}
}
