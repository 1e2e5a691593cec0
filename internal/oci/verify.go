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

// fileSums are the sha256 of files written whole by the layers.
type fileSums struct {
	mu sync.Mutex
	m  map[string]string
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
func verifyPulled(dir string, m *golden.Manifest, sums *fileSums) error {
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
	for _, f := range m.Files {
		if !fs.FileMode(f.Mode).IsRegular() {
			continue
		}
		sum, ok := sums.m[f.Path]
		if !ok {
			if sum, err = sha256File(filepath.Join(dir, "data", f.Path)); err != nil {
				return err
			}
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
