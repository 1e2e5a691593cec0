// Package fsutil holds the filesystem primitives every other package leans
// on: reading the mount table, refusing to delete mounted paths, fsyncing
// trees, and telling filesystems apart.
package fsutil

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one line of /proc/self/mountinfo.
type Mount struct {
	ID, Parent int    // mount ids
	Dev        string // major:minor of the filesystem
	Root       string // the dir of the filesystem mounted (not "/" for a bind)
	Point      string
	Options    string // this mount's own options (nosuid, nodev, ...)
	FSType     string
	Source     string
}

// Mounts returns the current mount table of this process's namespace.
func Mounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		id, _ := strconv.Atoi(fields[0])
		parent, _ := strconv.Atoi(fields[1])
		out = append(out, Mount{
			ID: id, Parent: parent, Dev: fields[2], Root: unescapeMount(fields[3]), Options: fields[5],
			Point:  unescapeMount(fields[4]),
			FSType: fields[sep+1],
			Source: unescapeMount(fields[sep+2]),
		})
	}
	return out, sc.Err()
}

// unescapeMount undoes the octal escapes (\040 for space) the kernel uses.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountsUnder lists mount points at or below dir, deepest first, so they can
// be unmounted in order.
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	ms, err := Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	}
	// Deepest first: later mounts in mountinfo sit on top of earlier ones.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// IsMountpoint reports whether dir is itself a mount point.
func IsMountpoint(dir string) (bool, error) {
	ms, err := MountsUnder(dir)
	if err != nil {
		return false, err
	}
	clean := filepath.Clean(dir)
	if r, err := filepath.EvalSymlinks(clean); err == nil {
		clean = r
	}
	for _, m := range ms {
		if m == clean {
			return true, nil
		}
	}
	return false, nil
}

// Unmount detaches a mount point. A lazy detach is used only as a second
// attempt: it always succeeds, and then the path really is free to remove.
func Unmount(point string) error {
	err := unix.Unmount(point, 0)
	if err == nil || err == unix.EINVAL || err == unix.ENOENT {
		return nil
	}
	if err == unix.EBUSY {
		if err2 := unix.Unmount(point, unix.MNT_DETACH); err2 == nil {
			return nil
		}
	}
	return fmt.Errorf("unmount %s: %w", point, err)
}

// UnmountAllUnder unmounts every mount at or below dir. A loop device
// among them that drops cache flushes gets them back first: it keeps that
// mode for whoever attaches it next (loopcache.go).
func UnmountAllUnder(dir string) error {
	points, err := MountsUnder(dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		giveLoopsFlushes(points)
	}
	for _, p := range points {
		if err := Unmount(p); err != nil {
			return err
		}
	}
	return nil
}
