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
func addSlots(ctx context.Context, u store.User, eng engine.Engine, r *recipe.Recipe, tmp string, srv **engine.Server, o Options) error {
	if r.Fresh.Slots <= 0 {
		return nil
	}
	o.Progress.Step("start build server for the slots")
	started, err := eng.Start(ctx, buildSpec(u, eng, r, tmp, srv))
	if err != nil {
		return err
	}
	*srv = started
	if err := makeSlots(ctx, eng, started, r, o); err != nil {
		return err
	}
	if err := stopAndSeal(ctx, u, eng, started, r, tmp, o); err != nil {
		return err
	}
	*srv = nil
	return nil
}

// makeSlots makes the recipe's slots in the running build server: the
// slots are copies of the finished database (no slot sets hint bits or
// freezes on a test's first read) and part of the data dir every clone
// gets, paid for once per golden, not per test.
func makeSlots(ctx context.Context, eng engine.Engine, srv *engine.Server, r *recipe.Recipe, o Options) error {
	names := SlotNames(r.Fresh.Slots)
	if len(names) == 0 {
		return nil
	}
	sm, ok := eng.(engine.SlotMaker)
	if !ok {
		return errs.Unsupported("[fresh] slots: %s cannot copy a database inside its server; remove slots from the recipe", eng.Name())
	}
	o.Progress.Step(fmt.Sprintf("make %d slots", len(names)))
	if err := sm.MakeSlots(ctx, srv, names); err != nil {
		return fmt.Errorf("make slots: %w", err)
	}
	return nil
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
