package oci

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

const noFollow = syscall.O_NOFOLLOW

// makeTree creates a golden's directories and symlinks under data (which
// exists), before any layer writes a file into them. Directories start
// private; finishTree gives them their modes.
func makeTree(data string, files []golden.File) error {
	sorted := append([]golden.File(nil), files...)
	// A parent's path is a prefix of its children's, so it sorts first.
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		p := filepath.Join(data, f.Path)
		switch fs.FileMode(f.Mode).Type() {
		case fs.ModeDir:
			if err := os.Mkdir(p, 0o700); err != nil {
				return fmt.Errorf("create golden dir: %w", err)
			}
		case fs.ModeSymlink:
			if err := os.Symlink(f.Link, p); err != nil {
				return fmt.Errorf("create golden symlink: %w", err)
			}
		}
	}
	return nil
}

// finishTree gives every entry its manifest mode and the server user,
// children before their directories.
func finishTree(data string, files []golden.File, u store.User) error {
	sorted := append([]golden.File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path > sorted[j].Path })
	for _, f := range sorted {
		p := filepath.Join(data, f.Path)
		if err := u.Chown(p); err != nil {
			if os.IsNotExist(err) {
				continue // a missing file: Verify names it
			}
			return err
		}
		if fs.FileMode(f.Mode).Type() == fs.ModeSymlink {
			continue
		}
		if err := os.Chmod(p, fs.FileMode(f.Mode).Perm()); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// testHookTree is called with the work dir once the tree is made, before
// any layer is written (tests check who could touch it then).
var testHookTree func(tmp string)
