package golden

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/recipe"
	"github.com/dbfork/dbfork/internal/store"
)

// SlotNames are the names of a golden's n slots: slot_000, slot_001, …
// (fixed, so the manifest and every clone agree without asking the server).
func SlotNames(n int) []string {
	if n <= 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("slot_%03d", i)
	}
	return out
}

// addSlots makes the recipe's slots once the golden's database is
// finished (frozen, analyzed), stopped and sealed: the server starts once
// more on the sealed data dir (the build's uid, no TCP, no password),
// copies the database into each slot and stops cleanly, and the seal
// runs again. The slots are then copies of pages already stamped: the
// second seal reads them and changes nothing (the pages it has to change
// are the new catalog rows and WAL), where stamping N+1 unstamped
// databases rewrote every page of each (a 1 GB pgbench golden with 32
// slots: 33 GB checksummed twice and written back, then shared again). A
// kept step's state never gets slots: they are copies of the finished
// database, made at the end of the build.
func addSlots(ctx context.Context, u store.User, eng engine.Engine, r *recipe.Recipe, tmp string, srv **engine.Server, o Options) (dirs []string, err error) {
	if r.Fresh.Slots <= 0 {
		return nil, nil
	}
	o.Progress.Step("start build server for the slots")
	started, err := eng.Start(ctx, buildSpec(u, eng, r, tmp, srv))
	if err != nil {
		return nil, err
	}
	*srv = started
	if dirs, err = makeSlots(ctx, eng, started, r, o); err != nil {
		return nil, err
	}
	if err := stopClean(ctx, u, eng, started, tmp, o); err != nil {
		return nil, err
	}
	*srv = nil
	if n := shareTwins(ctx, filepath.Join(tmp, "data")); n > 0 {
		o.Log.Info("slots share their files' blocks with the database", "bytes", n)
	}
	if err := ctx.Err(); err != nil {
		return nil, err // interrupted: the build is discarded
	}
	return dirs, seal(ctx, u, eng, r, tmp, o)
}

// twinKey groups the files that may be copies of one another: a
// database's files and their copies in each slot have the same name
// (relation file node) and size, in another directory.
func twinKey(name string, size int64) string { return fmt.Sprintf("%s/%d", name, size) }

// shareTwins makes each regular file of data share its blocks with the
// first file of the same name and size where their bytes are equal
// (fsutil.CloneIfEqual: compared, then cloned, so nothing changes what a
// file reads; the build's server is stopped and its uid has no process
// left), unless they share them already (PostgreSQL 18 cloned the
// slots). Then the seal and the checksums see twins by their blocks
// (fsutil.SameBlocks) and do not read them: a slot copied byte by byte
// (PostgreSQL 15) is read once, by the compare, instead of by the seal
// (which rewrote it) and by SHA-256. It is only a saving: where the
// filesystem cannot, files stay as they are. It returns the bytes
// shared.
func shareTwins(ctx context.Context, data string) (shared int64) {
	first := map[string][]string{}
	_ = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return fs.SkipAll // addSlots fails on the same ctx
		}
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.Size() < 8192 {
			return nil
		}
		k := twinKey(d.Name(), fi.Size())
		for _, src := range first[k] {
			n, err := cloneTwin(ctx, src, p)
			if err == nil {
				shared += n
				return nil
			}
			if !errors.Is(err, fsutil.ErrDiffer) {
				return fs.SkipAll // the filesystem cannot: stop trying
			}
		}
		// A content of its own (template1's catalogs have the names and
		// often the sizes of the database's): another file to compare
		// with, a few per name.
		if len(first[k]) < maxTwinSources {
			first[k] = append(first[k], p)
		}
		return nil
	})
	return shared
}

// maxTwinSources bounds the distinct contents a name is compared with.
const maxTwinSources = 3

// cloneTwin makes dst share src's blocks where their bytes are equal,
// and says how many bytes dst now shares with src.
func cloneTwin(ctx context.Context, src, dst string) (int64, error) {
	s, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	d, err := os.OpenFile(dst, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	if fsutil.SameBlocks(s, d) {
		return 0, nil
	}
	if err := fsutil.CloneIfEqual(ctx, s, d); err != nil {
		return 0, err
	}
	fi, err := d.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// makeSlots makes the recipe's slots in the running build server: the
// slots are copies of the finished database (no slot sets hint bits or
// freezes on a test's first read) and part of the data dir every clone
// gets, paid for once per golden, not per test.
func makeSlots(ctx context.Context, eng engine.Engine, srv *engine.Server, r *recipe.Recipe, o Options) ([]string, error) {
	names := SlotNames(r.Fresh.Slots)
	if len(names) == 0 {
		return nil, nil
	}
	sm, ok := eng.(engine.SlotMaker)
	if !ok {
		return nil, errs.Unsupported("[fresh] slots: %s cannot copy a database inside its server; remove slots from the recipe", eng.Name())
	}
	o.Progress.Step(fmt.Sprintf("make %d slots", len(names)))
	dirs, err := sm.MakeSlots(ctx, srv, names)
	if err != nil {
		return nil, fmt.Errorf("make slots: %w", err)
	}
	if len(dirs) != len(names) {
		return nil, fmt.Errorf("make slots: %s said where %d of %d slots are", eng.Name(), len(dirs), len(names))
	}
	return dirs, nil
}

// shareIdentical makes the regular files of data that have the same
// content (same size and SHA-256, as the manifest lists them) share
// their extents, where the filesystem can (FICLONE: XFS with reflink,
// btrfs). A golden with slots needs it: its slots are byte copies of
// its database, and even where PostgreSQL cloned them the seal's page
// stamping rewrote every copy. Without sharing, the golden holds its
// database 1+N times. It is only a saving: on a filesystem that cannot
// clone, or for a file that will not, the files stay as they are. The
// build's server user has no process left (stopBuildServer), so no one
// swaps a file meanwhile; files are opened without following links.
func shareIdentical(data string, files []File, r *recipe.Recipe) (shared int64) {
	if r.Fresh.Slots == 0 {
		return 0
	}
	first := map[string]string{} // size/sha256 -> first path
	for _, f := range files {
		if f.SHA256 == "" || f.Size < 8192 || !fs.FileMode(f.Mode).IsRegular() {
			continue
		}
		k := fmt.Sprintf("%d/%s", f.Size, f.SHA256)
		src, ok := first[k]
		if !ok {
			first[k] = f.Path
			continue
		}
		if fsutil.SameBlocksPath(filepath.Join(data, src), filepath.Join(data, f.Path)) {
			shared += f.Size // shared already (shareTwins, or cloned by the server)
			continue
		}
		if err := cloneOnto(filepath.Join(data, src), filepath.Join(data, f.Path)); err != nil {
			if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EXDEV) {
				return shared // the filesystem cannot: stop trying
			}
			continue
		}
		shared += f.Size
	}
	return shared
}

// cloneOnto makes dst's content src's extents.
func cloneOnto(src, dst string) error {
	s, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := os.OpenFile(dst, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.IoctlFileClone(int(d.Fd()), int(s.Fd()))
}
