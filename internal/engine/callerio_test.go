package engine

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

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
