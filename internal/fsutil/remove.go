package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// RemoveAll deletes path and everything below it, but refuses when anything
// at or below it is still mounted: deleting through a mount would destroy
// the golden it exposes.
func RemoveAll(path string) error { return removeAll(path, 0) }

// RemoveClone is RemoveAll for a clone's data: its regular files of at
// least freeMin bytes are emptied first (FreeBlocks), so their blocks are
// free when it returns. Only for trees whose files are nobody else's.
func RemoveClone(path string, freeMin int64) error { return removeAll(path, freeMin) }

func removeAll(path string, freeMin int64) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	mounted, err := MountsUnder(path)
	if err != nil {
		return err
	}
	if len(mounted) > 0 {
		return fmt.Errorf("refusing to remove %s: %s is still mounted", path, mounted[0])
	}
	if freeMin > 0 {
		FreeBlocks(path, freeMin)
	}
	if err := os.RemoveAll(path); err != nil {
		// Files made read-only (goldens) may sit in dirs we cannot write as
		// non-root; make dirs writable and retry once.
		_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = ChmodNoFollow(p, 0o700) // never through a link swapped in meanwhile
			}
			return nil
		})
		if err2 := os.RemoveAll(path); err2 != nil {
			return fmt.Errorf("remove %s: %w", path, err2)
		}
	}
	return nil
}
