package fsutil_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/testenv"
)

// SameBlocks holds for a reflinked copy and for one CloneIfEqual cloned,
// never for a byte copy or a file that differs; CloneIfEqual clones only
// equal bytes and says when they differ.
func TestSameBlocksAndCloneIfEqual(t *testing.T) {
	mnt := testenv.LoopFS(t, "xfs", 300<<20)
	data := make([]byte, 20<<20+12345) // more than one dedupe call, a partial last block
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(mnt, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := func(p string) *os.File {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	src := write("src", data)
	copied := write("copy", data)
	changed := append([]byte(nil), data...)
	changed[len(changed)-100] ^= 1
	other := write("other", changed)
	clone := filepath.Join(mnt, "clone")
	if out, err := exec.Command("cp", "--reflink=always", src, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp --reflink: %v %s", err, out)
	}
	s := open(src)
	if !fsutil.SameBlocks(s, open(clone)) {
		t.Error("a reflinked copy is not in the same blocks")
	}
	if fsutil.SameBlocks(s, open(copied)) {
		t.Error("a byte copy is in the same blocks before any dedupe")
	}
	if err := fsutil.CloneIfEqual(context.Background(), s, open(copied)); err != nil {
		t.Fatalf("clone of an equal copy: %v", err)
	}
	if !fsutil.SameBlocks(s, open(copied)) {
		t.Error("an equal copy cloned is not in the same blocks")
	}
	if got, err := os.ReadFile(copied); err != nil || string(got) != string(data) {
		t.Fatalf("the cloned copy reads differently: %v", err)
	}
	if err := fsutil.CloneIfEqual(context.Background(), s, open(other)); !errors.Is(err, fsutil.ErrDiffer) {
		t.Fatalf("clone of a file that differs in its last block: %v, want ErrDiffer", err)
	}
	if fsutil.SameBlocks(s, open(other)) {
		t.Error("a file that differs is in the same blocks")
	}
	if got, err := os.ReadFile(other); err != nil || string(got) != string(changed) {
		t.Fatalf("CloneIfEqual changed what a differing file reads: %v", err)
	}
	if !fsutil.SameBlocksPath(src, clone) || fsutil.SameBlocksPath(src, other) {
		t.Error("SameBlocksPath disagrees with SameBlocks")
	}
}

// DistinctBytes counts blocks shared within the dir once: a reflinked
// copy adds nothing, a byte copy its size.
func TestDistinctBytes(t *testing.T) {
	mnt := testenv.LoopFS(t, "xfs", 300<<20)
	dir := filepath.Join(mnt, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	src := filepath.Join(dir, "a")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		n, err := fsutil.DistinctBytes(dir)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := size(); n != int64(len(data)) {
		t.Fatalf("one 8 MiB file: %d bytes", n)
	}
	if out, err := exec.Command("cp", "--reflink=always", src, filepath.Join(dir, "clone")).CombinedOutput(); err != nil {
		t.Fatalf("cp --reflink: %v %s", err, out)
	}
	if n := size(); n != int64(len(data)) {
		t.Fatalf("with a reflinked copy: %d bytes, want %d", n, len(data))
	}
	if err := os.WriteFile(filepath.Join(dir, "copy"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if n := size(); n != 2*int64(len(data)) {
		t.Fatalf("with a byte copy too: %d bytes, want %d", n, 2*len(data))
	}
}
