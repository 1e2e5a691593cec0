package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/textutil"
)

// A user store is the copy-on-write store root sets up once for one user
// (`sudo dbfork store init --user NAME`); from then on that user builds,
// clones and serves on it by reflink, without root:
//
//	BASE/NAME.img  the image: root's, 0600, recorded as dbfork's (trusted.dbfork.store)
//	BASE/NAME      its mount point, root's; the filesystem's root is NAME's, 0700
//
// BASE (/var/lib/dbfork-users) and every dir above it are root's and
// writable by nobody else (sticky dirs such as /tmp excepted above BASE),
// so no user can swap the mount point for a symlink before the next mount,
// as they could a path in their home. An fstab entry remounts it at boot
// (fstab.go).

// DefaultUserStores is where per-user stores live.
const DefaultUserStores = "/var/lib/dbfork-users"

// UserStores says where per-user stores live and which fstab remounts
// them (plain values from the CLI: tests use their own).
type UserStores struct {
	Base  string // DefaultUserStores
	Fstab string // /etc/fstab
}

// UserStore is one user's store.
type UserStore struct {
	Name     string
	UID, GID int
	Root     string // the mount point: the store's path
	Image    string
}

// userName is what a store's path may be named after: no slash, blank,
// comma or colon (mount options, fstab fields), no leading dot or dash.
var userName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

// Lookup resolves name to an existing account other than root and the
// paths of its store.
func (us UserStores) Lookup(name string) (*UserStore, error) {
	if !userName.MatchString(name) || strings.HasSuffix(name, ".img") {
		return nil, errs.Invalid("user name %q cannot name a store (letters, digits, _ . - only, not ending in .img)", name)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, errs.NotFound("no user %q on this machine; give an existing user with --user NAME", name)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, errs.Invalid("user %s has a non-numeric id", name)
	}
	if uid == 0 {
		return nil, errs.Invalid("root needs no user store: root's store is %s (`dbfork store init` without --user)", "/var/lib/dbfork")
	}
	base, err := us.base()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(base, name)
	return &UserStore{Name: name, UID: uid, GID: gid, Root: root, Image: ImagePath(root)}, nil
}

func (us UserStores) base() (string, error) {
	if !filepath.IsAbs(us.Base) || strings.ContainsAny(us.Base, " \t\n#,:\\") {
		return "", errs.Invalid("user stores dir %q must be an absolute path without blanks, #, comma, colon or backslash", us.Base)
	}
	return filepath.Clean(us.Base), nil
}

// checkRootChain refuses dir unless every existing component from / down
// to it is a real directory of root's that nobody else can write; sticky
// dirs are allowed above dir (others cannot rename what root made there).
// With all set, every component must exist.
func checkRootChain(dir string, all bool) error {
	cur := "/"
	parts := strings.Split(strings.TrimPrefix(dir, "/"), "/")
	for i, p := range append([]string{""}, parts...) {
		cur = filepath.Join(cur, p)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) && !all {
			return nil
		}
		if err == nil && !fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
			err = fmt.Errorf("%s is not a directory", cur)
		}
		if err == nil {
			err = checkOwned(cur, fi, i < len(parts))
		}
		if err != nil {
			return errs.Invalid("user stores dir %s: %w; a user store lives only below dirs that only root can change", dir, err)
		}
	}
	return nil
}

// Init makes, records, mounts and hands over name's store, and writes
// its fstab entry. A second Init changes nothing and says so (Conflict).
// fstype is xfs or btrfs; size 0 sizes the sparse image to the disk.
func (us UserStores) Init(name, fstype string, size int64) (_ *UserStore, err error) {
	if os.Geteuid() != 0 {
		return nil, errs.Unsupported("setting up a user's store needs root: sudo dbfork store init --user %s", name)
	}
	s, err := us.Lookup(name)
	if err != nil {
		return nil, err
	}
	base := filepath.Dir(s.Root)
	if err := checkRootChain(base, false); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, err
	}
	if err := checkRootChain(base, true); err != nil { // nothing was swapped in while we made it
		return nil, err
	}
	unlock, err := lockDir(base)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Lstat(s.Image); err == nil {
		state := "mounted"
		if !sameFile(mountedFrom(s.Root), s.Image) {
			state = "not mounted (mount it: sudo dbfork store mount --user " + name + ")"
		}
		return s, errs.Conflict("%s's store already exists at %s (image %s, %s); nothing changed", name, s.Root, s.Image, state)
	}
	madeDir, err := s.claimMountPoint()
	if err != nil {
		return nil, err
	}
	if size == 0 {
		free, ferr := fsutil.FreeBytes(base)
		if size = AutoImageSize(free); ferr != nil || size == 0 {
			return nil, errs.Unsupported("%s has too little free space for a store image; free some or give --size", base)
		}
	}
	if err := createLoopFS(s.Image, s.Root, fstype, size, false); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil { // leave nothing half made
			_ = unix.Unmount(s.Root, 0)
			_, _ = fstabSet(us.Fstab, name, s.Root)
			os.Remove(s.Image)
			if madeDir {
				os.Remove(s.Root)
			}
		}
	}()
	if _, err := fstabSet(us.Fstab, name, s.Root, fstabMarker(name), fstabEntry(s.Image, s.Root, fstype)); err != nil {
		return nil, err
	}
	if err := us.mount(s); err != nil {
		return nil, err
	}
	return s, s.handOver()
}

// claimMountPoint makes the mount point, or accepts an empty, unmounted
// dir of root's that nobody else can write; it says whether it made it.
func (s *UserStore) claimMountPoint() (bool, error) {
	made := false
	if err := os.Mkdir(s.Root, 0o755); err == nil {
		made = true
	} else if !errors.Is(err, os.ErrExist) {
		return false, err
	}
	fi, err := os.Lstat(s.Root)
	if err == nil && !fi.IsDir() && fi.Mode()&os.ModeSymlink == 0 {
		err = fmt.Errorf("%s is not a directory", s.Root)
	}
	if err == nil {
		err = checkOwned(s.Root, fi, false)
	}
	if err != nil {
		return false, errs.Invalid("mount point of %s's store: %w; remove it (dbfork makes it)", s.Name, err)
	}
	if mounted, _ := fsutil.IsMountpoint(s.Root); mounted {
		return false, errs.Conflict("%s is already a mount point; unmount it first", s.Root)
	}
	if entries, _ := os.ReadDir(s.Root); len(entries) > 0 {
		return false, errs.Conflict("%s is not empty; a store's mount point must be", s.Root)
	}
	return made, nil
}

// handOver gives the filesystem's root to the user, 0700, through a
// descriptor of the mounted root (no path walked twice).
func (s *UserStore) handOver() error {
	fd, err := unix.Open(s.Root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", s.Root, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, s.UID, s.GID); err != nil {
		return fmt.Errorf("give %s to %s: %w", s.Root, s.Name, err)
	}
	return unix.Fchmod(fd, 0o700)
}

// mount mounts s by its fstab entry, exactly as the boot does, after the
// checks root makes before mounting anything: the mount point's dirs are
// root's alone, the image is root's and recorded for this path.
func (us UserStores) mount(s *UserStore) error {
	if err := checkRootChain(filepath.Dir(s.Root), true); err != nil {
		return err
	}
	if _, err := s.claimMountPoint(); err != nil {
		return err
	}
	if err := checkImage(s.Image, s.Root); err != nil {
		return err
	}
	fsutil.ResetFreeLoops() // a device left without flushes by an unmount outside dbfork
	if out, err := exec.Command("mount", "--fstab", us.Fstab, s.Root).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %s by its entry in %s: %v: %s", s.Root, us.Fstab, err, textutil.OneLine(string(out), "; ", 0))
	}
	if !sameFile(mountedFrom(s.Root), s.Image) {
		_ = unix.Unmount(s.Root, 0)
		return fmt.Errorf("%s is not mounted from %s after mount", s.Root, s.Image)
	}
	return nil
}

// Mount mounts name's existing store by its fstab entry (written again
// if it was lost): what a boot does, for a machine whose boot did not.
func (us UserStores) Mount(name string) (*UserStore, error) {
	if os.Geteuid() != 0 {
		return nil, errs.Unsupported("mounting a user's store needs root: sudo dbfork store mount --user %s", name)
	}
	s, err := us.Lookup(name)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(s.Image); err != nil {
		return nil, errs.NotFound("%s has no store (no %s); make one: sudo dbfork store init --user %s", name, s.Image, name)
	}
	if sameFile(mountedFrom(s.Root), s.Image) {
		return s, nil
	}
	if !fstabHas(us.Fstab, s.Root) {
		fstype := "btrfs"
		if isXFS(s.Image) {
			fstype = "xfs"
		}
		if _, err := fstabSet(us.Fstab, name, s.Root, fstabMarker(name), fstabEntry(s.Image, s.Root, fstype)); err != nil {
			return nil, err
		}
	}
	return s, us.mount(s)
}

// lockDir takes an exclusive lock on dir itself (no lock file left
// behind): inits and removals of user stores take turns.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// ownerOf is the uid owning path (following links), -1 if unknown.
func ownerOf(path string) int {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
