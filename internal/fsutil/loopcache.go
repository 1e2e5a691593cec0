package fsutil

import (
	"fmt"
	"os"
	"path/filepath"
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
	dev, ok := strings.CutPrefix(src, "/dev/")
	if !ok || !strings.HasPrefix(dev, "loop") || strings.Contains(dev, "/") {
		return "", nil
	}
	return dev, nil
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
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync store image %s: %w", img, err)
	}
	return nil
}
