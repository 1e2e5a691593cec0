package fsutil

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A file of data, 8 MiB of zeros, data and a zero tail: punching and
// sparse writing keep every byte and stop owning the zero blocks.
func TestSparse(t *testing.T) {
	content := append(bytes.Repeat([]byte("a"), 5000), make([]byte, 8<<20)...)
	content = append(content, bytes.Repeat([]byte("b"), 100)...)
	content = append(content, make([]byte, 3<<20)...)
	dir := t.TempDir()

	punched := filepath.Join(dir, "punched")
	if err := os.WriteFile(punched, content, 0o600); err != nil {
		t.Fatal(err)
	}
	freed, err := PunchZeros(punched, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if freed < 10<<20 {
		t.Errorf("freed %d bytes, want the ~11 MiB of zero blocks", freed)
	}
	check(t, punched, content)

	written := filepath.Join(dir, "written")
	f, err := os.Create(written)
	if err != nil {
		t.Fatal(err)
	}
	// In two parts, the second first, as an OCI layer split may arrive.
	half := int64(len(content) / 2)
	if n, err := WriteSparse(f, half, bytes.NewReader(content[half:]), int64(len(content))-half); err != nil || n != int64(len(content))-half {
		t.Fatalf("second half: %d %v", n, err)
	}
	if n, err := WriteSparse(f, 0, bytes.NewReader(content[:half]), half); err != nil || n != half {
		t.Fatalf("first half: %d %v", n, err)
	}
	f.Close()
	check(t, written, content)

	short := filepath.Join(dir, "short")
	f, _ = os.Create(short)
	if _, err := WriteSparse(f, 0, bytes.NewReader(content[:100]), 200); err == nil {
		t.Error("a reader shorter than n was not an error")
	}
	f.Close()
}

func check(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: content changed (%d bytes, want %d): %v", path, len(got), len(want), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if owned := st.Blocks * 512; owned > 1<<20 {
		t.Errorf("%s owns %d bytes; the zero blocks should be holes", path, owned)
	}
}
