package fsutil_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/testenv"
)

// On XFS a reflinked copy owns nothing until it is written; a plain copy
// owns all of it.
func TestPrivateBytes(t *testing.T) {
	mnt := testenv.LoopFS(t, "xfs", 300<<20)
	src := filepath.Join(mnt, "src")
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		min  int64
		max  int64
	}{
		{"reflink", []string{"--reflink=always"}, 0, 0},
		{"copy", []string{"--reflink=never"}, 8 << 20, 8 << 20},
	} {
		dst := filepath.Join(mnt, c.name)
		_ = os.MkdirAll(dst, 0o755)
		if out, err := exec.Command("cp", append(c.args, filepath.Join(src, "f"), dst)...).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
		got, err := fsutil.PrivateBytes(dst)
		if err != nil || got < c.min || got > c.max {
			t.Errorf("%s: %d bytes private (%v), want %d..%d", c.name, got, err, c.min, c.max)
		}
	}
	// Overwrite 4 KiB of the reflinked copy: it now owns about that much
	// (XFS may reserve a bigger copy-on-write extent).
	f, err := os.OpenFile(filepath.Join(mnt, "reflink", "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatal(err)
	}
	_ = f.Sync()
	f.Close()
	got, _ := fsutil.PrivateBytes(filepath.Join(mnt, "reflink"))
	if got < 4096 || got >= 8<<20 {
		t.Errorf("after a 4 KiB write the reflink owns %d bytes", got)
	}
}
