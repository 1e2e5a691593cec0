package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
)

// SyncDir fsyncs a directory so that entries created or renamed in it are
// durable.
func SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// ReplaceFile writes data to path through a temporary file renamed into
// place: readers see the old content or the new, never a part, and a
// crash of the writer leaves one of the two. Nothing is synced: for
// records that matter only while the machine runs (an instance's state:
// its servers and mounts do not outlive a reboot either).
func ReplaceFile(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, false)
}

// WriteFileAtomic writes data to path through a temporary file, fsyncs it,
// renames it into place and fsyncs the directory.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := replace(path, data, perm, true); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// replace writes a temporary file beside path (fsynced if sync) and
// renames it over path.
func replace(path string, data []byte, perm os.FileMode, sync bool) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// SyncDirs fsyncs every directory at and below root, deepest first, so
// every entry in the tree is durable, and returns how many it synced.
func SyncDirs(root string) (int, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := SyncDir(dirs[i]); err != nil {
			return len(dirs) - 1 - i, err
		}
	}
	return len(dirs), nil
}
