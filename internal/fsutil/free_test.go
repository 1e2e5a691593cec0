package fsutil

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FreeBlocks empties the big files of a tree and nothing else: not the
// small ones, not a file that has another name (a hard link outside),
// and nothing a symlink inside points at.
func TestFreeBlocks(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "clone")
	outside := filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(root, "base", "1"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte{7}, 3<<20)
	write := func(p string, data []byte) {
		t.Helper()
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "base", "1", "table"), big)
	write(filepath.Join(root, "small"), []byte("keep me"))
	write(filepath.Join(outside, "linked"), big)
	if err := os.Link(filepath.Join(outside, "linked"), filepath.Join(root, "hardlink")); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(outside, "target"), big)
	if err := os.Symlink(filepath.Join(outside, "target"), filepath.Join(root, "symlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "base", "dirlink")); err != nil {
		t.Fatal(err)
	}

	if freed := FreeBlocks(root, 1<<20); freed < 3<<20 {
		t.Fatalf("freed %d bytes, want the big table's 3 MiB", freed)
	}
	size := func(p string) int64 {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if n := size(filepath.Join(root, "base", "1", "table")); n != 0 {
		t.Errorf("big file still %d bytes", n)
	}
	if n := size(filepath.Join(root, "small")); n != 7 {
		t.Errorf("small file now %d bytes", n)
	}
	for _, p := range []string{filepath.Join(outside, "linked"), filepath.Join(outside, "target")} {
		if n := size(p); n != int64(len(big)) {
			t.Errorf("%s is %d bytes: FreeBlocks reached a file it must not", p, n)
		}
	}
	if FreeBlocks(filepath.Join(dir, "missing"), 1) != 0 {
		t.Error("a missing root freed something")
	}
}
