package golden

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Unpublish takes the golden with this key out of sight in one rename:
// its dir becomes a tmp-… dir, which gc reaps like a crashed build once
// the caller's build lock is gone. The caller holds s.BuildLock(key) and
// has made sure nothing uses the golden. It returns the new path, for the
// caller to remove; a crash before that leaves nothing visible.
func Unpublish(s *store.Store, key string) (string, error) {
	// A fresh name (os.Rename will not replace a dir); RENAME_NOREPLACE
	// makes a collision an error rather than a replacement.
	tmp := filepath.Join(s.GoldensDir(), tmpPrefix+"removed-"+textutil.Password()[:12])
	if err := unix.Renameat2(unix.AT_FDCWD, s.GoldenDir(key), unix.AT_FDCWD, tmp, unix.RENAME_NOREPLACE); err != nil {
		return "", fmt.Errorf("unpublish golden %s: %w", short(key), err)
	}
	if err := os.WriteFile(filepath.Join(tmp, keyFile), []byte(key+"\n"), 0o600); err != nil {
		return tmp, err
	}
	return tmp, fsutil.SyncDir(s.GoldensDir())
}

// Discard removes a dir made by Unpublish (or a build's), data first.
func Discard(dir string) error { return discardBuild(dir) }

// setAsideBroken moves a golden dir without a valid manifest (a crash in
// an older dbfork's removal, or damage) out of the key's way, so a build
// can publish there and gc can reap it. The caller holds the key's lock.
func setAsideBroken(s *store.Store, key string) error {
	if _, err := os.Lstat(s.GoldenDir(key)); err != nil {
		return nil
	}
	if _, err := Lookup(s, key); err == nil {
		return nil
	}
	_, err := Unpublish(s, key)
	return err
}
