package backend

import (
	"os"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// GoldenSide is implemented by backends whose clones need the golden's
// data dir made their own way (btrfs snapshots only subvolumes; ZFS would
// want a dataset): the other half of their copy-on-write. The functions
// below ask the table's golden sides in order; where none makes or holds
// a data dir, it is a plain directory, which every other backend clones.
//
// A golden is built before any clone is made, so the side is picked by
// where the data dir lives (the store's filesystem), not by a backend
// chosen for a clone.
type GoldenSide interface {
	// MakeGolden creates path (which must not exist) as this backend's
	// kind of data dir, mode 0700, and reports made; where path's
	// filesystem cannot hold one it creates nothing and reports false.
	MakeGolden(path string) (made bool, err error)
	// HoldsGolden reports whether path is one of this backend's data
	// dirs (made by MakeGolden, or a clone or copy of one).
	HoldsGolden(path string) bool
	// FreezeGolden makes a held data dir refuse every write; clones of
	// it stay writable.
	FreezeGolden(path string) error
	// ThawGolden undoes FreezeGolden.
	ThawGolden(path string) error
	// RemoveGolden deletes a held data dir by the backend's own means.
	// When it cannot, it leaves path removable file by file (thawed) and
	// returns why; RemoveDataDir then removes it so.
	RemoveGolden(path string) error
	// CopyGolden makes dst (which must not exist) a standalone writable
	// copy of the held data dir src (no mount, nothing to keep src for).
	CopyGolden(src, dst string) error
}

// goldenSides are the table's golden sides, in table order.
func goldenSides() []GoldenSide {
	var out []GoldenSide
	for _, b := range all {
		if g, ok := b.(GoldenSide); ok {
			out = append(out, g)
		}
	}
	return out
}

// holder is the golden side that holds path and its backend's name; nil
// for a plain dir.
func holder(path string) (GoldenSide, string) {
	for _, b := range all {
		if g, ok := b.(GoldenSide); ok && g.HoldsGolden(path) {
			return g, b.Name()
		}
	}
	return nil, ""
}

// NewDataDir creates the directory a golden is built in: the first golden
// side that can make one there does (on a btrfs store, a subvolume, so it
// can be snapshotted), else a plain dir.
func NewDataDir(path string) error {
	for _, g := range goldenSides() {
		if made, err := g.MakeGolden(path); made {
			return err
		}
	}
	return os.Mkdir(path, 0o700)
}

// FreezeDataDir makes a finished golden's data dir refuse writes where the
// filesystem can do that without hurting clones: its golden side freezes
// it (a btrfs subvolume becomes read-only; snapshots of it stay
// writable). A plain dir is left as it is: OverlayFS refuses writes to
// lower files that are immutable (chattr +i), and read-only modes would be
// copied into every clone; there the golden is kept out of reach by its
// root-only directory (see golden.Build).
func FreezeDataDir(path string) error {
	if g, _ := holder(path); g != nil {
		return g.FreezeGolden(path)
	}
	return nil
}

// ThawDataDir undoes FreezeDataDir for a moment of root's own (a one-time
// migration of a golden's modes); it reports whether there was anything
// to undo, so the caller can freeze the dir again.
func ThawDataDir(path string) (bool, error) {
	g, _ := holder(path)
	if g == nil {
		return false, nil
	}
	return true, g.ThawGolden(path)
}

// RemoveDataDir deletes a data dir made by NewDataDir or by a backend.
func RemoveDataDir(path string) error {
	if g, _ := holder(path); g != nil && g.RemoveGolden(path) == nil {
		return nil
	}
	// The big files' blocks are freed before the caller returns, not in
	// the filesystem's background after it (fsutil.FreeBlocks).
	return fsutil.RemoveClone(path, freeBlocksMin)
}

// freeBlocksMin: files smaller than this are left to the removal (a
// truncate each would cost more than it saves).
const freeBlocksMin = 1 << 20
