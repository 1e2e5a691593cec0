package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A loop device passes a cache flush (every fsync inside its filesystem
// ends in one) on as an fsync of its whole backing file, and with
// buffered loop I/O that writes back every page of the image the host has
// not written yet. On an XFS store under a write-heavy clone those
// flushes blocked the loop device for up to 0.7 s, and with it every read
// and write of every clone (docs/mariadb.md). A loop device whose queue is
// set to "write through" gets no flushes at all: the host writes the
// image back at its own pace, and whoever needs something on disk fsyncs
// the image itself (SyncBacking).

// LoopDevice names the loop device (e.g. "loop3") whose filesystem is
// mounted at the mount point holding path, or "" when that is not a loop
// device.
func LoopDevice(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	ms, err := Mounts()
	if err != nil {
		return "", err
	}
	best, src := -1, ""
	for _, m := range ms {
		if (m.Point == abs || m.Point == "/" || strings.HasPrefix(abs, m.Point+"/")) && len(m.Point) >= best {
			best, src = len(m.Point), m.Source // equal length: the later one is on top
		}
	}
	dev, _ := LoopName(src)
	return dev, nil
}

// LoopName is the loop device's name in a mount source ("/dev/loop3" ->
// "loop3"), ok false for anything else.
func LoopName(source string) (string, bool) {
	dev, ok := strings.CutPrefix(source, "/dev/")
	if !ok || !strings.HasPrefix(dev, "loop") || strings.Contains(dev, "/") {
		return "", false
	}
	return dev, true
}

func loopSys(dev, name string) string { return filepath.Join("/sys/block", dev, name) }

// LoopWriteThrough says whether loop device dev drops cache flushes.
func LoopWriteThrough(dev string) bool {
	b, err := os.ReadFile(loopSys(dev, "queue/write_cache"))
	return err == nil && strings.TrimSpace(string(b)) == "write through"
}

// SetLoopWriteThrough makes loop device dev drop cache flushes (on) or
// pass them to its backing file again (off).
func SetLoopWriteThrough(dev string, on bool) error {
	mode := "write back"
	if on {
		mode = "write through"
	}
	if err := os.WriteFile(loopSys(dev, "queue/write_cache"), []byte(mode), 0); err != nil {
		return fmt.Errorf("set %s's cache mode to %q: %w", dev, mode, err)
	}
	return nil
}

// The mode is a setting of the device, not of the attachment: a loop
// device detached in "write through" mode comes back in it for whoever
// attaches it next. So dbfork sets write back before it unmounts a store
// image, sets the mode it wants on every image it mounts, and
// ResetFreeLoops puts back free devices an unmount outside dbfork (a
// plain umount, a shutdown's) left behind.

// ResetFreeLoops sets every loop device with nothing attached that drops
// cache flushes back to passing them on, and says which it reset.
func ResetFreeLoops() []string {
	devs, _ := filepath.Glob("/sys/block/loop*")
	var reset []string
	for _, d := range devs {
		dev := filepath.Base(d)
		if _, err := os.Stat(loopSys(dev, "loop/backing_file")); err == nil {
			continue // attached: its user set what it wants
		}
		if LoopWriteThrough(dev) && SetLoopWriteThrough(dev, false) == nil {
			reset = append(reset, dev)
		}
	}
	return reset
}

// giveLoopsFlushes sets the loop devices mounted at points (if any) back
// to passing cache flushes on, before they are unmounted.
func giveLoopsFlushes(points []string) {
	ms, err := Mounts()
	if err != nil {
		return
	}
	for _, m := range ms {
		dev, ok := LoopName(m.Source)
		if !ok || !slices.Contains(points, m.Point) {
			continue
		}
		if LoopWriteThrough(dev) {
			_ = SetLoopWriteThrough(dev, false)
		}
	}
}

// LoopBackingFile names the file behind loop device dev.
func LoopBackingFile(dev string) (string, error) {
	b, err := os.ReadFile(loopSys(dev, "loop/backing_file"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// SyncBacking makes durable what the caller has already synced inside the
// filesystem holding path, when that filesystem sits on a loop device
// that drops cache flushes: there an fsync inside ends in the host's page
// cache, so the backing file is fsynced as well. Elsewhere it does
// nothing. Publishing a golden or an engine calls it after its own syncs.
func SyncBacking(path string) error {
	dev, err := LoopDevice(path)
	if err != nil || dev == "" || !LoopWriteThrough(dev) {
		return err
	}
	img, err := LoopBackingFile(dev)
	if err != nil {
		return err
	}
	f, err := os.Open(img)
	if errors.Is(err, fs.ErrPermission) {
		// Someone else's store image (root's, 0600): only its owner can
		// sync it. After a machine stop the mount-time check still
		// catches damage (store/attach.go).
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync store image %s: %w", img, err)
	}
	return nil
}
