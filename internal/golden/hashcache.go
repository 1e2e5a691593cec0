package golden

import (
	"context"
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
	"syscall"
	"time"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
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
	return hc.SumAs(context.Background(), path)
}

// SumAs returns the sha256 and size of a file opened with the rights of
// the user ctx acts for (caller.AsFS): a file they cannot read is
// refused even when its hash is cached, and only a regular file is read
// (a FIFO or a device would hang the call or never end). The cache is
// consulted with what that open found, not with a second lookup by path.
func (hc *HashCache) SumAs(ctx context.Context, path string) (string, int64, error) {
	var got struct {
		sum  string
		size int64
	}
	err := caller.AsFS(ctx, func() error {
		var err error
		got.sum, got.size, err = hc.sumOpen(ctx, path)
		return err
	})
	switch {
	case err == nil:
		return got.sum, got.size, nil
	case errors.Is(err, fs.ErrNotExist):
		return "", 0, errs.NotFound("input %s not found", path)
	case errors.Is(err, fs.ErrPermission) && caller.From(ctx) != nil:
		return "", 0, errs.Invalid("input %s cannot be read by uid %d (the user who asked): builds read inputs with their rights", path, caller.UID(ctx))
	case ctx.Err() != nil:
		return "", 0, ctx.Err()
	}
	return "", 0, errs.Invalid("input %w", err)
}

func (hc *HashCache) sumOpen(ctx context.Context, path string) (string, int64, error) {
	f, fi, err := engine.OpenInput(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", 0, fmt.Errorf("%s: no file status", path)
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
	// No more than the size it had when opened: a file someone keeps
	// appending to does not keep the build reading.
	sum, n, err := hashFrom(ctx, f, nil, st.Size)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", path, err)
	}
	if n != st.Size {
		return "", 0, fmt.Errorf("%s changed while it was hashed: run again", path)
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

// hashFrom reads r to its end (or past max bytes, when max >= 0) and
// returns the sha256 and length of what it read, copying it to w when w
// is not nil. ctx is checked between chunks.
func hashFrom(ctx context.Context, r io.Reader, w io.Writer, max int64) (string, int64, error) {
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		k, err := r.Read(buf)
		if k > 0 {
			n += int64(k)
			h.Write(buf[:k])
			if w != nil {
				if _, werr := w.Write(buf[:k]); werr != nil {
					return "", n, werr
				}
			}
			if max >= 0 && n > max {
				return "", n, nil
			}
		}
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", n, fmt.Errorf("read: %w", err)
		}
	}
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
