package golden

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/store"
)

// keepLog saves a failed build's logs where the one who asked for the
// build can read them and nobody else can (they hold seed data and command
// output): STORE/logs/uid-UID/ (0700) and the file (0600), both owned by
// that user. The error points at the file.
func keepLog(ctx context.Context, s *store.Store, tmp, key string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var b strings.Builder
	for _, name := range []string{"init.log", "build.log", "server.log"} {
		if data, rerr := os.ReadFile(filepath.Join(tmp, name)); rerr == nil && len(data) > 0 {
			fmt.Fprintf(&b, "==== %s\n%s\n", name, data)
		}
	}
	if b.Len() == 0 {
		return err
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if c := caller.From(ctx); c != nil {
		uid, gid = c.UID, c.GID
	}
	dst, werr := writePrivateLog(filepath.Join(s.Root, "logs"), uid, gid, "build-"+short(key)+".log", b.String())
	if werr != nil {
		return err
	}
	return fmt.Errorf("%w (build log: %s)", err, dst)
}

// writePrivateLog writes body to DIR/uid-UID/name for uid alone, never
// following a link the user may have put there.
func writePrivateLog(logs string, uid, gid int, name, body string) (string, error) {
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return "", err
	}
	dir := filepath.Join(logs, fmt.Sprintf("uid-%d", uid))
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	// A new file renamed over the old name: whatever the user left at
	// that name (a link to someone else's file) is replaced, never written.
	dst := filepath.Join(dir, name)
	tmp := dst + ".new-" + randomPassword()[:8]
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return "", err
	}
	_, werr := f.WriteString(body)
	if err := errors.Join(werr, f.Chown(uid, gid), f.Close()); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return dst, nil
}
