package fsutil

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

func walkStat(root string, fn func(*unix.Stat_t)) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fn(&st)
		return nil
	})
}
