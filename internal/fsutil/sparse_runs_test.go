package fsutil

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// WriteNonZero in odd-sized pieces at an unaligned offset: every byte
// comes back, including a lone non-zero byte at a block's end, and the
// file owns no more than its non-zero blocks.
func TestWriteNonZeroRuns(t *testing.T) {
	const block = 4096
	rng := rand.New(rand.NewSource(1))
	content := make([]byte, 200*block)
	nonZero := 0
	for b := 0; b < 200; b++ {
		switch rng.Intn(3) {
		case 0: // a zero block
		case 1:
			rng.Read(content[b*block : (b+1)*block])
			nonZero++
		case 2:
			content[(b+1)*block-1] = 7
			nonZero++
		}
	}
	path := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	const at = 3 * block
	for off := 0; off < len(content); off += 7777 {
		end := min(off+7777, len(content))
		if err := WriteNonZero(f, int64(at+off), content[off:end]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(int64(at + len(content))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:at], make([]byte, at)) || !bytes.Equal(got[at:], content) {
		t.Fatal("content changed")
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if owned := st.Blocks * 512; owned > int64(nonZero*block)+64<<10 {
		t.Errorf("file owns %d bytes for %d non-zero blocks; zero blocks should be holes", owned, nonZero)
	}
}
