package golden

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/store"
)

// As root, a build's server runs as a uid of its own (store.ClaimUser),
// so neither a test's SQL in an instance nor another build can reach its
// data while it loads. Init still runs as the server user (initdb needs a
// user name); its tree is handed to the build's uid before the build
// server starts, and given back to the server user, shared with its
// group, once that uid has no process left (shareTree).

// openBuildDir makes tmp (a new build dir) one nobody else can list
// (0711, as root): what is inside is each root's (logs, server record),
// the build uid's own (data, socket dir, server log) or meant for the
// callers' clients (client options, no secret).
func openBuildDir(s *store.Store, tmp string) error {
	if !s.User.Dropped() {
		return os.Chmod(tmp, 0o755)
	}
	return os.Chmod(tmp, 0o711)
}

// buildUser claims a uid for the build in tmp and hands it what init made
// (the data dir, the socket dir, a private tmp dir).
func buildUser(s *store.Store, tmp string) (store.User, error) {
	u, err := s.ClaimUser(tmp)
	if err != nil || !s.User.Dropped() {
		return u, err
	}
	// Only init (a trusted binary, as the server user) wrote here.
	err = filepath.WalkDir(filepath.Join(tmp, "data"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, u.UID, u.GID)
	})
	if err != nil {
		return u, err
	}
	for _, d := range []string{"sock", "tmp"} {
		if err := os.Lchown(filepath.Join(tmp, d), u.UID, u.GID); err != nil && !os.IsNotExist(err) {
			return u, err
		}
	}
	return u, nil
}

// endBuildUser kills whatever still runs as the build's uid (programs
// its SQL started) and gives the uid back.
func endBuildUser(ctx context.Context, u store.User, tmp string) error {
	return store.ReleaseUser(ctx, u.UID, tmp)
}
