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

// The copy-on-write extent size hint set on a dir is inherited by what is
// created below it, and bounds what a write to a reflinked file costs.
func TestCowExtSize(t *testing.T) {
	mnt := testenv.LoopFS(t, "xfs", 300<<20)
	dir := filepath.Join(mnt, "inst")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.SetCowExtSize(dir, 8192); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "data")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(mnt, "src")
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i)
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	clone := filepath.Join(sub, "f")
	if out, err := exec.Command("cp", "--reflink=always", src, clone).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if got := fsutil.CowExtSize(clone); got != 8192 {
		t.Fatalf("a file made below the dir has cowextsize %d, want 8192", got)
	}
	// Write one 8 KiB page in each of 16 places: private space stays near
	// 16 × 8 KiB, not 16 × 128 KiB.
	f, err := os.OpenFile(clone, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		if _, err := f.WriteAt(make([]byte, 8192), int64(i)*256<<10); err != nil {
			t.Fatal(err)
		}
	}
	_ = f.Sync()
	f.Close()
	owned, _ := fsutil.PrivateBytes(clone)
	if owned < 16*8192 || owned > 16*32<<10 {
		t.Errorf("16 page writes made the clone own %d bytes", owned)
	}
	if err := fsutil.SetCowExtSize(t.TempDir(), 8192); err != nil {
		t.Errorf("on a non-XFS dir: %v, want a silent no-op", err)
	}
}

// SyncDirs reaches every directory of a tree (a golden's entries must all
// be durable before its manifest is written).
func TestSyncDirs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b/c", "a/d", "e"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a/b/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := fsutil.SyncDirs(root)
	if err != nil || n != 6 {
		t.Fatalf("SyncDirs: %d dirs, %v; want 6", n, err)
	}
}
