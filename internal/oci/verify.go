package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
)

// fileSums are the sha256 of files written whole by the layers, and the
// ranges of each file that layer entries have claimed.
type fileSums struct {
	mu     sync.Mutex
	m      map[string]string
	claims map[string][][2]int64
}

func newFileSums() *fileSums {
	return &fileSums{m: map[string]string{}, claims: map[string][][2]int64{}}
}

// claim reserves bytes [off, off+n) of path for one layer entry. Entries
// may not overlap: a file's content is then exactly what its entries
// carried (zero blocks are holes of a file created at its full size), so
// a whole file's sum taken while writing is the file's sum.
func (s *fileSums) claim(path string, off, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.claims[path] {
		if off < c[0]+c[1] && c[0] < off+n || n == 0 && c[1] == 0 {
			return errs.Invalid("layer entries for %q overlap (%d bytes at %d and %d at %d)", path, n, off, c[1], c[0])
		}
	}
	s.claims[path] = append(s.claims[path], [2]int64{off, n})
	return nil
}

func (s *fileSums) set(path, sum string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[path] = sum
}

// verifyPulled checks a pulled data dir against the golden's manifest:
// the file set, types, modes and sizes (golden.Verify), then every
// regular file's sha256 (hashed while written, or read back when it
// came in parts).
//
// A copy made from another file (copies.go) has its source's sum: the
// source's own is checked (once, however many copies it has).
func verifyPulled(dir string, m *golden.Manifest, sums *fileSums, copies map[string]string) error {
	fail := func(what string, n int) error {
		return errs.Conflict("pulled golden %s does not match its manifest (%s, %d problems); nothing was published", golden.Short(m.Key), what, n)
	}
	probs, err := golden.Verify(&golden.Golden{Key: m.Key, Dir: dir, Manifest: m}, false)
	if err != nil {
		return err
	}
	if len(probs) > 0 {
		return fail(probs[0].String(), len(probs))
	}
	read := map[string]string{} // sums read back
	sumOf := func(p string) (string, error) {
		if sum, ok := sums.m[p]; ok {
			return sum, nil
		}
		if sum, ok := read[p]; ok {
			return sum, nil
		}
		sum, err := sha256File(filepath.Join(dir, "data", p))
		read[p] = sum
		return sum, err
	}
	files, err := m.Files()
	if err != nil {
		return err
	}
	for _, f := range files {
		if !fs.FileMode(f.Mode).IsRegular() {
			continue
		}
		p := f.Path
		if src, ok := copies[p]; ok {
			p = src
		}
		sum, err := sumOf(p)
		if err != nil {
			return err
		}
		if sum != f.SHA256 {
			return fail(f.Path+": content differs (sha256)", 1)
		}
	}
	return nil
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// syncFS flushes the filesystem holding dir: one call instead of an
// fsync per file.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
