package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
)

// As root, dbfork mounts what it finds at a store path and runs servers on
// what is inside. A store another user can swap, or an image another user
// made, would hand them root (a setuid binary on a mounted image, symlinks
// followed by root). So, as root, every existing component of a store path
// must be a real directory (no symlink) owned by root and writable by no
// one else — except sticky directories such as /tmp above the store, where
// others cannot rename or remove what root made.

// checkSecurePath refuses a store path that someone other than root could
// change under us. It checks the components that exist; missing ones will
// be created by root.
func checkSecurePath(abs string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	for i, p := range append([]string{""}, parts...) {
		if p != "" {
			cur = filepath.Join(cur, p)
		}
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check store path %s: %w", cur, err)
		}
		last := i == len(parts)
		if err := checkOwned(cur, fi, !last); err != nil {
			return errs.Invalid("store %s: %w; as root dbfork only uses a store path that only root can change (use --store under /var/lib or a root-owned dir)", abs, err)
		}
	}
	return nil
}

// checkOwned says what is wrong with one path component for root's use.
func checkOwned(path string, fi os.FileInfo, stickyOK bool) error {
	if fi.Mode()&os.ModeSymlink != 0 {
		real, _ := filepath.EvalSymlinks(path)
		return fmt.Errorf("%s is a symlink (to %s); give the real path", path, real)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner information", path)
	}
	if st.Uid != 0 {
		return fmt.Errorf("%s belongs to uid %d, not root", path, st.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 && !(stickyOK && fi.Mode()&os.ModeSticky != 0) {
		return fmt.Errorf("%s is writable by group or others (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}

// imageRecord is the extended attribute that marks an image file as one
// dbfork made for a store, with the store's path as its value. Only root
// (CAP_SYS_ADMIN) can set trusted.* attributes, so another user cannot
// forge the record on an image of their own.
const imageRecord = "trusted.dbfork.store"

// recordImage marks img as the image of the store at root.
func recordImage(img, root string) error {
	if err := unix.Lsetxattr(img, imageRecord, []byte(root), 0); err != nil {
		return fmt.Errorf("record %s as the image of store %s (%s): %w", img, root, imageRecord, err)
	}
	return nil
}

// checkImage refuses an image dbfork did not record for this store, or
// one that someone other than root could have changed.
func checkImage(img, root string) error {
	fi, err := os.Lstat(img)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errs.Invalid("store image %s is not a regular file (%v); remove it or use another --store", img, fi.Mode().Type())
	}
	if err := checkOwned(img, fi, false); err != nil {
		return errs.Invalid("store image %s: %w; dbfork mounts only images it made (remove it or use another --store)", img, err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Lgetxattr(img, imageRecord, buf)
	if err != nil || string(buf[:n]) != root {
		return errs.Invalid("store image %s was not made by dbfork for %s (no %s record); if you made it with `dbfork store init`, adopt it with: sudo dbfork --store %s store mount", img, root, imageRecord, root)
	}
	return nil
}
