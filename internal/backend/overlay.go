package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// Overlay mounts a kernel OverlayFS with the golden as its lower layer.
// Creation is one mount, but the kernel copies a whole file up on its
// first read-write open.
type Overlay struct{}

func (Overlay) Name() string { return "overlay" }

func (Overlay) Describe() string {
	return "kernel OverlayFS works here: one mount per clone, but a file is copied whole on its first read-write open"
}

// Caps: reads go through the golden's own files and their cached pages.
func (Overlay) Caps() Caps { return Caps{CopiesUp: true} }

func (o Overlay) Probe(ctx context.Context, dir string) error {
	p, done, err := probeDir(dir, "overlay")
	if err != nil {
		return err
	}
	defer done()
	lower, err := probeLower(p)
	if err != nil {
		return err
	}
	merged := filepath.Join(p, "merged")
	if err := o.Prepare(ctx, lower, merged, filepath.Join(p, "scratch")); err != nil {
		if errors.Is(err, unix.EPERM) {
			if os.Geteuid() != 0 {
				return fmt.Errorf("mounting OverlayFS in dbfork's own namespace needs root (%v); without root, userns-overlay mounts it in the server's namespace instead", err)
			}
			return fmt.Errorf("mounting OverlayFS needs root here (%v); run dbfork as root, or use a reflink/btrfs store", err)
		}
		return err
	}
	defer o.Remove(ctx, merged, filepath.Join(p, "scratch"))
	return os.WriteFile(filepath.Join(merged, "f"), []byte("y"), 0o600)
}

// Prepare mounts the overlay at clone. The upper dir takes the golden
// root's owner and mode, so the merged dir is 0700 and owned by the server
// user, as PostgreSQL demands of a data dir.
func (Overlay) Prepare(ctx context.Context, golden, clone, scratch string) error {
	for _, p := range []string{golden, clone, scratch} {
		if strings.ContainsAny(p, ",:\\") {
			return fmt.Errorf("path %q has a comma, colon or backslash, which OverlayFS options cannot hold; use another store path", p)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(golden, &st); err != nil {
		return err
	}
	// A second mount over a live clone would hide it, not replace it.
	if _, err := os.Lstat(clone); err == nil {
		return fmt.Errorf("clone %s already exists", clone)
	}
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{scratch, upper, work, clone} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := lchown(upper, &st); err != nil {
		return err
	}
	if err := os.Chmod(upper, os.FileMode(st.Mode&0o7777)); err != nil {
		return err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", golden, upper, work)
	if err := mountOverlay(clone, opts, work); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", clone, err)
	}
	return nil
}

// mountOverlay mounts an OverlayFS clone at target with opts (the
// layers), adding what a throwaway clone wants where the kernel has it:
//   - index=off: clones of one golden share its lower dir, and the inode
//     index would tie the lower dir to one upper;
//   - volatile (Linux 5.10): no sync reaches the upper filesystem. Every
//     copy-up otherwise ends with an fsync of the new upper file, which
//     on a loop-backed store goes through to the disk below: tens of ms
//     for each file a server first opens for writing. A crash leaves the
//     upper unusable, and a clone is removed after a crash anyway.
//
// A volatile mount leaves a marker in work (work/incompat/volatile) that
// makes the kernel refuse the next mount of the same layers. Without a
// crash between (a rootless server started again in a new namespace,
// after a port collision), the upper's writes are all in the page cache,
// so the marker is removed first.
//
// A clone holds data files only: nothing on it may run, gain privileges
// or be a device (the server user writes there).
func mountOverlay(target, opts, work string) error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := os.RemoveAll(filepath.Join(work, "work", "incompat", "volatile")); err != nil {
		return err
	}
	var err error
	for _, extra := range []string{",index=off,volatile", ",index=off", ""} {
		err = unix.Mount("overlay", target, "overlay", flags, opts+extra)
		if !errors.Is(err, unix.EINVAL) {
			return err
		}
	}
	return err
}

func (Overlay) Remove(ctx context.Context, clone, scratch string) error {
	if err := fsutil.UnmountAllUnder(clone); err != nil {
		return err
	}
	if err := fsutil.RemoveAll(clone); err != nil {
		return err
	}
	return fsutil.RemoveAll(scratch)
}

// OwnedDir: an overlay clone owns its upper dir (files copied up or new).
func (Overlay) OwnedDir(clone, scratch string) string { return filepath.Join(scratch, "upper") }

// CheapCopyUp: the kernel copies up by reflink where the upper dir's
// filesystem shares extents.
func (Overlay) CheapCopyUp(scratch string) bool {
	fs, err := fsutil.FSType(scratch)
	return err == nil && (fs == "xfs" || fs == "btrfs")
}

// probeLower makes the one-file lower layer both overlay probes mount.
func probeLower(p string) (string, error) {
	lower := filepath.Join(p, "lower")
	if err := os.Mkdir(lower, 0o755); err != nil {
		return "", err
	}
	return lower, os.WriteFile(filepath.Join(lower, "f"), []byte("x"), 0o600)
}
