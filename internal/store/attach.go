package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/textutil"
)

// An XFS store image is attached with its loop device in "write through"
// mode (fsutil/loopcache.go): no fsync inside waits for the host to write
// the image back, which is what stalled clones. The price is the
// ordering a journaling filesystem relies on when the machine stops
// without unmounting it (power loss, a crash): the image on disk may then
// hold some of the last writes and not others. So:
//   - publishing a golden or an engine fsyncs the image itself
//     (fsutil.SyncBacking), so what is published is on disk;
//   - the image carries the boot id of the boot that attached it
//     (attachedRecord), removed when dbfork unmounts it; and
//   - mounting an image attached in an earlier boot first replays its log
//     with flushes on, then checks the whole filesystem (xfs_repair -n),
//     and refuses a damaged one. After a clean shutdown the check passes
//     (a few seconds, once per boot); after a crash it catches what the
//     lost ordering could break, such as a shared extent's reference
//     count, before a clone's removal could free a golden's blocks.

// attachedRecord is the xattr on a store image holding the boot id of the
// boot that attached it with flushes off.
const attachedRecord = "trusted.dbfork.attached"

// isXFS says whether img holds an XFS filesystem (its superblock magic).
func isXFS(img string) bool {
	f, err := os.Open(img)
	if err != nil {
		return false
	}
	defer f.Close()
	magic := make([]byte, 4)
	_, err = f.ReadAt(magic, 0)
	return err == nil && string(magic) == "XFSB"
}

func bootID() string {
	id, _ := proc.Sysctl("kernel.random.boot_id")
	return id
}

// recordAttached stamps img with this boot's id, durably, before it is
// attached with flushes off.
func recordAttached(img string) error {
	id := bootID()
	if id == "" {
		return nil // no boot id: the image stays in write-back mode (writeThrough checks)
	}
	if err := unix.Lsetxattr(img, attachedRecord, []byte(id), 0); err != nil {
		return fmt.Errorf("record the attachment of %s (%s): %w", img, attachedRecord, err)
	}
	return fsyncPath(img)
}

// setLoopCache sets the cache mode of the loop device mounted at dir: no
// flushes for an XFS image recorded as attached in this boot, flushes for
// anything else (the device may come with the mode of its last user, see
// fsutil/loopcache.go). Best effort for speed: a device left in write-back
// mode is slower, not less safe; one that cannot be set back to write back
// is an error.
func setLoopCache(dir string, xfs bool) error {
	dev, err := fsutil.LoopDevice(dir)
	if err != nil || dev == "" {
		return err
	}
	if xfs && bootID() != "" {
		_ = fsutil.SetLoopWriteThrough(dev, true)
		return nil
	}
	if fsutil.LoopWriteThrough(dev) {
		return fsutil.SetLoopWriteThrough(dev, false)
	}
	return nil
}

// detached syncs an image dbfork just unmounted and removes its attach
// record: everything it held is on disk.
func detached(img *os.File) error {
	if err := img.Sync(); err != nil {
		return fmt.Errorf("sync store image %s: %w", img.Name(), err)
	}
	if err := unix.Fremovexattr(int(img.Fd()), attachedRecord); err != nil && !errors.Is(err, unix.ENODATA) {
		return fmt.Errorf("clear the attachment record of %s: %w", img.Name(), err)
	}
	return img.Sync()
}

// checkAfterStop checks the filesystem of an image that was attached with
// flushes off when the machine last stopped (see above). dir is the
// store's mount point, free at this point.
func checkAfterStop(img, dir string) error {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(img, attachedRecord, buf)
	if err != nil || n == 0 || string(buf[:n]) == bootID() {
		return nil // never attached that way, or attached in this boot (nothing was lost)
	}
	fix := "repair it with `xfs_repair " + img + "`, or remove it and make a new store (`dbfork store init`; goldens are rebuilt or pulled)"
	if _, err := exec.LookPath("xfs_repair"); err != nil {
		return errs.MissingTool("store image %s was attached when the machine last stopped and must be checked, but xfs_repair is not on PATH; install it: apt-get install xfsprogs", img)
	}
	// Replay the log with flushes on and leave it clean, then check.
	if out, err := exec.Command("mount", "-o", "loop,nosuid,nodev", img, dir).CombinedOutput(); err != nil {
		rout, _ := exec.Command("xfs_repair", "-n", "-f", img).CombinedOutput()
		return errs.Invalid("store image %s was attached when the machine last stopped and its filesystem is damaged (mount: %s; xfs_repair -n: %s): %s", img, textutil.OneLine(string(out), "; ", 0), repairFinding(rout), fix)
	}
	if err := fsutil.Unmount(dir); err != nil {
		return err
	}
	out, err := exec.Command("xfs_repair", "-n", "-f", img).CombinedOutput()
	if err != nil {
		return errs.Invalid("store image %s was attached when the machine last stopped and its filesystem is damaged (xfs_repair -n: %s): %s", img, repairFinding(out), fix)
	}
	if err := unix.Lremovexattr(img, attachedRecord); err != nil && !errors.Is(err, unix.ENODATA) {
		return fmt.Errorf("clear the attachment record of %s: %w", img, err)
	}
	return nil
}

// repairFinding picks the first two lines of xfs_repair's report that are
// neither progress nor its notes about checking an image file.
func repairFinding(out []byte) string {
	var found []string
	for _, ln := range bytes.Split(out, []byte("\n")) {
		s := strings.TrimSpace(string(ln))
		noise := s == "" || strings.HasPrefix(s, "- ")
		for _, p := range []string{"Phase ", "No modify flag set", "Cannot get host filesystem geometry", "Repair may fail", "the image and the host"} {
			noise = noise || strings.HasPrefix(s, p)
		}
		if !noise {
			found = append(found, s)
		}
		if len(found) == 2 {
			break
		}
	}
	if len(found) == 0 {
		return textutil.OneLine(string(out), "; ", 0)
	}
	return strings.Join(found, "; ")
}

func fsyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
