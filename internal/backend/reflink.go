package backend

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Reflink clones every file with FICLONE: files share extents with the
// golden until a block is written (XFS with reflink=1, btrfs).
type Reflink struct{}

func (Reflink) Name() string { return "reflink" }

func (Reflink) Probe(ctx context.Context, dir string) error {
	p, done, err := probeDir(dir, "reflink")
	if err != nil {
		return err
	}
	defer done()
	src := filepath.Join(p, "a")
	if err := os.WriteFile(src, make([]byte, 8192), 0o600); err != nil {
		return err
	}
	err = copyFile(src, filepath.Join(p, "b"), reflinkFile)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTTY) {
		fs, _ := fsFor(dir)
		return fmt.Errorf("the %s filesystem cannot share extents (FICLONE: %v); use XFS made with reflink=1 or btrfs, e.g. `dbfork store init --fs xfs --size 20G`", fs, unix.EOPNOTSUPP)
	}
	return err
}

func (Reflink) Prepare(ctx context.Context, golden, clone, scratch string) error {
	return copyTree(golden, clone, reflinkFile)
}

func (Reflink) Remove(ctx context.Context, clone, scratch string) error {
	return RemoveDataDir(clone)
}
