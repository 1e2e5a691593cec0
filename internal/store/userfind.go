package store

// Removing a user store, and finding it for its user (Locate: the one
// rule for the default store).

import (
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
)

// Remove unmounts name's store and removes its image, its mount point and
// its fstab entry. It refuses while anything of the store is in use
// (instances, a daemon, open files): nothing is detached lazily, so no
// loop device outlives the removal.
func (us UserStores) Remove(name string) error {
	if os.Geteuid() != 0 {
		return errs.Unsupported("removing a user's store needs root: sudo dbfork store rm --user %s", name)
	}
	s, err := us.Lookup(name)
	if err != nil {
		return err
	}
	base := filepath.Dir(s.Root)
	if err := checkRootChain(base, true); err != nil {
		if _, serr := os.Lstat(base); errors.Is(serr, os.ErrNotExist) {
			return errs.NotFound("%s has no store (no %s)", name, base)
		}
		return err
	}
	unlock, err := lockDir(base)
	if err != nil {
		return err
	}
	defer unlock()
	_, imgErr := os.Lstat(s.Image)
	_, dirErr := os.Lstat(s.Root)
	if imgErr != nil && dirErr != nil && !fstabHas(us.Fstab, s.Root) {
		return errs.NotFound("%s has no store (no %s)", name, s.Image)
	}
	if sameFile(mountedFrom(s.Root), s.Image) {
		if err := s.unmount(); err != nil {
			return err
		}
	} else if mounted, _ := fsutil.IsMountpoint(s.Root); mounted {
		return errs.Conflict("%s is mounted from something other than %s; unmount it yourself first", s.Root, s.Image)
	}
	if _, err := fstabSet(us.Fstab, name, s.Root); err != nil {
		return err
	}
	if err := os.Remove(s.Image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(s.Root); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err // never RemoveAll: the mount point is empty once unmounted
	}
	return nil
}

// unmount refuses while the store is in use, then unmounts it; the loop
// device goes with it (autoclear).
func (s *UserStore) unmount() error {
	busy := "%s's store %s is in use (%s); as %s: dbfork down --all and dbfork daemon stop, then try again"
	if points, err := fsutil.MountsUnder(s.Root); err != nil {
		return err
	} else if len(points) > 1 {
		return errs.Conflict(busy, s.Name, s.Root, "instances are mounted in it", s.Name)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.Root, "instances")); len(entries) > 0 {
		return errs.Conflict(busy, s.Name, s.Root, "instances exist in it", s.Name)
	}
	if lock := filepath.Join(s.Root, "locks", "serve.lock"); fileExists(lock) && lockfile.Held(lock) {
		return errs.Conflict(busy, s.Name, s.Root, "a dbfork daemon serves it", s.Name)
	}
	lf, err := lockImage(s.Image)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := unix.Unmount(s.Root, 0); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return errs.Conflict(busy, s.Name, s.Root, "a process has files open in it", s.Name)
		}
		return err
	}
	return detached(lf)
}

// FindUserStore is the store `store init --user` made under base for the
// user uid, for that user's own commands; "" when there is none. A store
// that exists but is not mounted (a boot that did not read the fstab) is
// an error naming the command that mounts it. It is used only when its
// image is root's, every dir down to it root's alone, and the mounted
// filesystem's root the user's.
func FindUserStore(base string, uid int) (string, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil || !userName.MatchString(u.Username) {
		return "", nil
	}
	b, err := UserStores{Base: base}.base()
	if err != nil {
		return "", err
	}
	root := filepath.Join(b, u.Username)
	img := ImagePath(root)
	fi, err := os.Lstat(img)
	if err != nil {
		return "", nil
	}
	if err := checkRootChain(b, true); err != nil {
		return "", err
	}
	if err := checkOwned(img, fi, false); err != nil || !fi.Mode().IsRegular() {
		return "", errs.Invalid("your store image %s is not a file of root's alone; ask an admin to make it again: sudo dbfork store rm --user %s && sudo dbfork store init --user %s", img, u.Username, u.Username)
	}
	if !sameFile(mountedFrom(root), img) {
		return "", errs.Unsupported("your store %s is not mounted; mount it (once per boot if the fstab is not read): sudo dbfork store mount --user %s", root, u.Username)
	}
	if owner := ownerOf(root); owner != uid {
		return "", errs.Invalid("your store %s belongs to uid %d, not to you (uid %d); ask an admin to make it again: sudo dbfork store rm --user %s && sudo dbfork store init --user %s", root, owner, uid, u.Username, u.Username)
	}
	return root, nil
}

// Locate is the one rule for the store a command uses: named (--store,
// else $DBFORK_STORE, as the caller read them) when given; as root
// /var/lib/dbfork; for any other user their user store under userStores
// when one exists, else $XDG_DATA_HOME/dbfork (DefaultRoot: dataHome is
// $XDG_DATA_HOME as the caller read it).
func Locate(named, userStores, dataHome string) (string, error) {
	if named != "" {
		return named, nil
	}
	if os.Geteuid() != 0 {
		if root, err := FindUserStore(userStores, os.Geteuid()); err != nil || root != "" {
			return root, err
		}
	}
	return DefaultRoot(dataHome), nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
