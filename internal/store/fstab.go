package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A user store is remounted at boot by an fstab entry dbfork writes (no
// systemd needed), preceded by a marker comment naming its user, so that
// `dbfork store rm --user NAME` finds and removes exactly what init added.

// userMountOptions are the user store's mount options. nosuid,nodev: no
// file on the image gains privileges; discard: space freed inside goes
// back to the host; nofail: a missing image does not stop the boot. The
// loop device stays in its default write-back mode: a boot-time mount
// cannot run the check that an image attached without cache flushes needs
// after a crash (attach.go).
const userMountOptions = "loop,nosuid,nodev,discard,nofail"

func fstabMarker(name string) string {
	return "# dbfork: copy-on-write store of user " + name + " (remove with: dbfork store rm --user " + name + ")"
}

func fstabEntry(img, root, fstype string) string {
	return fmt.Sprintf("%s %s %s %s 0 0", img, root, fstype, userMountOptions)
}

// fstabHas says whether the fstab at path mounts something at root.
func fstabHas(path, root string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, ln := range strings.Split(string(data), "\n") {
		if f := strings.Fields(ln); len(f) >= 2 && !strings.HasPrefix(f[0], "#") && f[1] == root {
			return true
		}
	}
	return false
}

// fstabSet rewrites the fstab at path without name's marker and any entry
// mounting at root, then adds lines (none: only removes). It says whether
// the file changed.
func fstabSet(path, name, root string, lines ...string) (bool, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	var kept []string
	changed := false
	for _, ln := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		f := strings.Fields(ln)
		if ln == fstabMarker(name) || (len(f) >= 2 && !strings.HasPrefix(f[0], "#") && f[1] == root) {
			changed = true
			continue
		}
		kept = append(kept, ln)
	}
	if len(kept) == 1 && kept[0] == "" {
		kept = nil
	}
	if len(lines) > 0 {
		kept = append(kept, lines...)
		changed = true
	}
	if !changed {
		return false, nil
	}
	text := ""
	if len(kept) > 0 {
		text = strings.Join(kept, "\n") + "\n"
	}
	return true, replaceFile(path, []byte(text))
}

// replaceFile writes data to path atomically: a new file beside it with
// the old one's mode, synced, renamed over it. A crash leaves the old
// fstab or the new one, never half of it.
func replaceFile(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".dbfork-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return fsyncPath(filepath.Dir(path))
}
