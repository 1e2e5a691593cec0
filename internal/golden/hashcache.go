package golden

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// HashCache remembers input file hashes by (size, mtime, ctime, inode),
// as git's index does, so that checking an unchanged recipe is fast. A
// file changed within the last two seconds is always re-read: its mtime
// could still change without the timestamp moving.
type HashCache struct {
	path    string
	mu      sync.Mutex
	entries map[string]cacheEntry
	dirty   bool
}

type cacheEntry struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime_ns"`
	Ctime int64  `json:"ctime_ns"`
	Ino   uint64 `json:"ino"`
	Sum   string `json:"sha256"`
}

// OpenHashCache loads the cache file (a missing or corrupt one is empty).
func OpenHashCache(path string) *HashCache {
	hc := &HashCache{path: path, entries: map[string]cacheEntry{}}
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &hc.entries)
	}
	return hc
}

// Sum returns the sha256 and size of a file.
func (hc *HashCache) Sum(path string) (string, int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, errs.NotFound("input %s not found", path)
		}
		return "", 0, errs.Invalid("input %s: %v", path, err)
	}
	e := cacheEntry{Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}
	if hc != nil {
		hc.mu.Lock()
		old, ok := hc.entries[path]
		hc.mu.Unlock()
		if ok && old.Size == e.Size && old.Mtime == e.Mtime && old.Ctime == e.Ctime && old.Ino == e.Ino {
			return old.Sum, e.Size, nil
		}
	}
	sum, err := fileSum(path)
	if err != nil {
		return "", 0, errs.Invalid("input %s: %v", path, err)
	}
	e.Sum = sum
	racy := time.Since(time.Unix(0, e.Mtime)) < 2*time.Second || time.Since(time.Unix(0, e.Ctime)) < 2*time.Second
	if hc != nil && !racy {
		hc.mu.Lock()
		hc.entries[path] = e
		hc.dirty = true
		hc.mu.Unlock()
	}
	return sum, e.Size, nil
}

// Save writes the cache back if it changed (best effort).
func (hc *HashCache) Save() {
	if hc == nil {
		return
	}
	hc.mu.Lock()
	defer hc.mu.Unlock()
	if !hc.dirty {
		return
	}
	for p := range hc.entries { // forget files that are gone
		if _, err := os.Stat(p); err != nil {
			delete(hc.entries, p)
		}
	}
	data, err := json.Marshal(hc.entries)
	if err == nil && os.MkdirAll(filepath.Dir(hc.path), 0o755) == nil {
		_ = fsutil.WriteFileAtomic(hc.path, data, 0o600)
	}
	hc.dirty = false
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyBuffer(h, f, make([]byte, 1<<20)); err != nil {
		return "", fmt.Errorf("read: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
