package fsutil

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Filesystem magic numbers from statfs(2).
const (
	magicBtrfs   = 0x9123683E
	magicXFS     = 0x58465342
	magicExt4    = 0xEF53
	magicTmpfs   = 0x01021994
	magicOverlay = 0x794C7630
	magicZFS     = 0x2FC12FC1
	magicFuse    = 0x65735546
	magicNFS     = 0x6969
)

// FSType names the filesystem that holds path ("btrfs", "xfs", "ext4", ...).
func FSType(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", path, err)
	}
	switch uint32(st.Type) {
	case magicBtrfs:
		return "btrfs", nil
	case magicXFS:
		return "xfs", nil
	case magicExt4:
		return "ext4", nil
	case magicTmpfs:
		return "tmpfs", nil
	case magicOverlay:
		return "overlay", nil
	case magicZFS:
		return "zfs", nil
	case magicFuse:
		return "fuse", nil
	case magicNFS:
		return "nfs", nil
	}
	return fmt.Sprintf("0x%x", uint32(st.Type)), nil
}

// FreeBytes returns the space available to unprivileged users at path.
func FreeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
