package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Btrfs snapshots the golden's subvolume: one ioctl, whatever the size.
type Btrfs struct{}

func (Btrfs) Name() string { return "btrfs" }

func (Btrfs) Describe() string {
	return "the store is on btrfs: a subvolume snapshot is O(1) and first writes copy only the blocks written"
}

// Caps: a snapshot shares every extent, and its files do not share the
// golden's cached pages.
func (Btrfs) Caps() Caps { return Caps{SharesExtents: true, ColdPageCache: true} }

func (Btrfs) Probe(ctx context.Context, dir string) error {
	if fs, err := fsFor(dir); err != nil {
		return err
	} else if fs != "btrfs" {
		return fmt.Errorf("the store is on %s, not btrfs (make a btrfs store with `dbfork store init --fs btrfs --size 20G`)", fs)
	}
	p, done, err := probeDir(dir, "btrfs")
	if err != nil {
		return err
	}
	defer done()
	sub := filepath.Join(p, "sub")
	if err := createSubvolume(sub); err != nil {
		return fmt.Errorf("create subvolume: %w", err)
	}
	defer RemoveDataDir(sub)
	snap := filepath.Join(p, "snap")
	if err := snapshot(sub, snap); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	// Without root and without user_subvol_rm_allowed the delete ioctl is
	// refused; RemoveDataDir then removes the files and rmdirs the empty
	// subvolume, which its owner may do (Linux 4.18 and later).
	if err := RemoveDataDir(snap); err != nil {
		return fmt.Errorf("delete snapshot: %w (as non-root, mount the store with user_subvol_rm_allowed)", err)
	}
	if _, err := os.Lstat(snap); err == nil {
		return fmt.Errorf("delete snapshot: %s is still there (as non-root, mount the store with user_subvol_rm_allowed)", snap)
	}
	return nil
}

// CanClone requires the golden to be a subvolume: goldens built on a btrfs
// store are; goldens moved in from elsewhere are not.
func (Btrfs) CanClone(golden string) error {
	if !isSubvolume(golden) {
		return fmt.Errorf("golden %s is not a btrfs subvolume (it was built before the store moved to btrfs; rebuild it)", golden)
	}
	return nil
}

func (b Btrfs) Prepare(ctx context.Context, golden, clone, scratch string) error {
	if err := b.CanClone(golden); err != nil {
		return err
	}
	return snapshot(golden, clone)
}

func (Btrfs) Remove(ctx context.Context, clone, scratch string) error {
	return RemoveDataDir(clone)
}

// The golden side: a golden built on a btrfs store is a subvolume, so
// that clones can be snapshots of it; frozen, it is a read-only one.

// MakeGolden makes path a subvolume where the store is on btrfs.
func (Btrfs) MakeGolden(path string) (bool, error) {
	if fs, err := fsutil.FSType(filepath.Dir(path)); err != nil || fs != "btrfs" {
		return false, nil
	}
	if err := createSubvolume(path); err != nil {
		return false, nil // a plain dir then; CanClone says why btrfs cannot clone it
	}
	return true, os.Chmod(path, 0o700)
}

// HoldsGolden: every subvolume (goldens, their snapshots).
func (Btrfs) HoldsGolden(path string) bool { return isSubvolume(path) }

// FreezeGolden: a read-only subvolume refuses every write, root's
// included; its snapshots are writable.
func (Btrfs) FreezeGolden(path string) error { return setSubvolumeReadOnly(path, true) }

func (Btrfs) ThawGolden(path string) error { return setSubvolumeReadOnly(path, false) }

// RemoveGolden deletes the subvolume with one ioctl. Without the ioctl
// (non-root, no user_subvol_rm_allowed) files can only go one by one,
// which a read-only subvolume refuses: it is made writable for that.
func (Btrfs) RemoveGolden(path string) error {
	if err := deleteSubvolume(path); err != nil {
		_ = setSubvolumeReadOnly(path, false)
		return err
	}
	return nil
}

// CopyGolden snapshots src: a snapshot stands alone (deleting src leaves
// it whole).
func (Btrfs) CopyGolden(src, dst string) error { return snapshot(src, dst) }

func fsFor(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			return fsutil.FSType(d)
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("%s: no existing parent", dir)
		}
	}
}

// Btrfs ioctls (linux/btrfs.h); both argument structs are 4096 bytes.
const (
	iocSubvolCreate   = 0x5000940E // _IOW(0x94, 14, struct btrfs_ioctl_vol_args)
	iocSnapDestroy    = 0x5000940F // _IOW(0x94, 15, struct btrfs_ioctl_vol_args)
	iocSnapCreateV2   = 0x50009417 // _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2)
	iocSubvolGetflags = 0x80089419 // _IOR(0x94, 25, __u64)
	iocSubvolSetflags = 0x4008941A // _IOW(0x94, 26, __u64)
	subvolRdonly      = 1 << 1     // BTRFS_SUBVOL_RDONLY
	btrfsFirstFree    = 256        // inode number of every subvolume root
)

type volArgs struct {
	fd   int64
	name [4088]byte
}

type volArgsV2 struct {
	fd      int64
	transid uint64
	flags   uint64
	unused  [4]uint64
	name    [4040]byte
}

func parentIoctl(path string, req uintptr, arg unsafe.Pointer) error {
	parent, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer parent.Close()
	_, _, e := unix.Syscall(unix.SYS_IOCTL, parent.Fd(), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

func createSubvolume(path string) error {
	var a volArgs
	copy(a.name[:len(a.name)-1], filepath.Base(path))
	return parentIoctl(path, iocSubvolCreate, unsafe.Pointer(&a))
}

func snapshot(src, dst string) error {
	s, err := os.Open(src)
	if err != nil {
		return err
	}
	defer s.Close()
	var a volArgsV2
	a.fd = int64(s.Fd())
	copy(a.name[:len(a.name)-1], filepath.Base(dst))
	if err := parentIoctl(dst, iocSnapCreateV2, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("snapshot %s: %w", src, err)
	}
	return nil
}

func deleteSubvolume(path string) error {
	if m, _ := fsutil.MountsUnder(path); len(m) > 0 {
		return fmt.Errorf("refusing to delete subvolume %s: %s is mounted", path, m[0])
	}
	var a volArgs
	copy(a.name[:len(a.name)-1], filepath.Base(path))
	if err := parentIoctl(path, iocSnapDestroy, unsafe.Pointer(&a)); err != nil {
		return fmt.Errorf("delete subvolume %s: %w", path, err)
	}
	return nil
}

func isSubvolume(path string) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil || st.Ino != btrfsFirstFree {
		return false
	}
	fs, err := fsutil.FSType(path)
	return err == nil && fs == "btrfs"
}

// setSubvolumeReadOnly sets or clears a subvolume's read-only flag. A
// read-only subvolume refuses every write, root's included; snapshots of
// it are writable, and it can still be deleted.
func setSubvolumeReadOnly(path string, ro bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var flags uint64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocSubvolGetflags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("read flags of subvolume %s: %w", path, e)
	}
	if ro {
		flags |= subvolRdonly
	} else {
		flags &^= subvolRdonly
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), iocSubvolSetflags, uintptr(unsafe.Pointer(&flags))); e != 0 {
		return fmt.Errorf("set flags of subvolume %s: %w", path, e)
	}
	return nil
}
