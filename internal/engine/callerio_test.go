package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// AsCallerFS opens files with the caller's rights only: root's 0600 file
// is refused to nobody, their own is not, and the rest of the process
// (other goroutines at the same time, and this one afterwards) keeps
// root's rights.
func TestAsCallerFSUsesTheCallersRights(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root; CI runs it as root")
	}
	// Not testenv (it imports engine's fetch: a cycle): a temp dir that
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
	ctx := WithCaller(context.Background(), func() *Caller { return LookupCaller(65534, 65534) })
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			err := AsCallerFS(ctx, func() error {
				f, _, err := OpenInput(secret)
				if err == nil {
					f.Close()
				}
				return err
			})
			if !errors.Is(err, fs.ErrPermission) {
				t.Errorf("nobody opened root's 0600 file: %v", err)
			}
			if err := AsCallerFS(ctx, func() error { _, err := os.ReadFile(public); return err }); err != nil {
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

// A FIFO or a device is refused at once, not read.
func TestOpenInputRefusesWhatIsNotAFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if f, _, err := OpenInput(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			if f != nil {
				f.Close()
			}
			t.Errorf("OpenInput(%s): %v", p, err)
		}
	}
}
