package fsutil

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// NoSuidNoDev reports whether dir is on a mount where set-id bits and
// device nodes have no effect.
func NoSuidNoDev(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Flags&unix.ST_NOSUID != 0 && st.Flags&unix.ST_NODEV != 0, nil
}

// BindNoSuid mounts dir onto itself, private (nothing mounted below it
// later propagates anywhere, nor comes back doubled through the mount it
// was taken from) and nosuid,nodev. Until the remount the bind is exactly
// as the dir was; a crash in between leaves a bind that IsSelfBind finds
// and RemountNoSuid finishes.
func BindNoSuid(dir string) error {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mount %s on itself: %w", dir, err)
	}
	err := unix.Mount("", dir, "", unix.MS_PRIVATE, "")
	if err == nil {
		err = RemountNoSuid(dir)
	}
	if err != nil {
		_ = unix.Unmount(dir, 0)
		return fmt.Errorf("make the bind mount of %s nosuid,nodev: %w", dir, err)
	}
	return nil
}

// RemountNoSuid adds nosuid,nodev to the bind mount at dir, keeping the
// flags it has (a bind remount sets them all at once).
func RemountNoSuid(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID | unix.MS_NODEV)
	for _, f := range []struct{ st, ms int64 }{
		{unix.ST_RDONLY, unix.MS_RDONLY}, {unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if st.Flags&f.st != 0 {
			flags |= uintptr(f.ms)
		}
	}
	if err := unix.Mount("", dir, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s nosuid,nodev: %w", dir, err)
	}
	return nil
}

// IsSelfBind reports whether the topmost mount at dir is dir bound onto
// itself: the same filesystem as the mount below it, showing the very
// directory it covers. That is how BindNoSuid leaves a plain store, and
// the mount table is its record: nothing else mounts a dir on itself.
func IsSelfBind(dir string) bool {
	dir = filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	ms, err := Mounts()
	if err != nil {
		return false
	}
	top := -1
	for i, m := range ms {
		if m.Point == dir {
			top = i // later lines sit on top
		}
	}
	if top < 0 {
		return false
	}
	for _, p := range ms {
		if p.ID != ms[top].Parent {
			continue
		}
		rel, err := filepath.Rel(p.Point, dir)
		return err == nil && p.Dev == ms[top].Dev && filepath.Join(p.Root, rel) == ms[top].Root
	}
	return false
}
