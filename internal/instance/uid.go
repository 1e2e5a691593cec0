package instance

import (
	"context"
	"fmt"
	"os"

	"github.com/dbfork/dbfork/internal/store"
)

// As root, each instance's server runs as a uid and gid of its own
// (store.ClaimUser): a test's SQL, which can run programs as that uid
// (COPY … TO PROGRAM), cannot enter another instance's dir, socket or
// clone, nor signal its server, and everything it started is killed when
// the instance ends (teardown) or is reset. The claim's owner is the
// instance dir; the uid is recorded in state.json.

// claimUser gives st a uid of its own and makes its dir one nobody else
// can list (0711): what is inside is each the uid's alone (socket dir,
// clone root, log) or root's (state, scratch), except the client option
// file (no secret in it) that callers' clients read.
func claimUser(s *store.Store, st *State) (store.User, error) {
	u, err := s.ClaimUser(st.Dir)
	if err != nil || !store.IsDynamicUID(u.UID) {
		return u, err
	}
	st.UID = u.UID
	if err := st.save(); err != nil {
		return u, err
	}
	return u, os.Chmod(st.Dir, 0o711)
}

// handOver gives a new clone's root to the instance's uid, mode 0700 (as
// PostgreSQL demands of a data dir). The files below stay the server
// user's, shared with its group (golden.Share), so reaching them takes
// passing this root.
func handOver(clone string, uid int) error {
	if !store.IsDynamicUID(uid) {
		return nil
	}
	if err := os.Lchown(clone, uid, uid); err != nil { // its gid is its uid
		return fmt.Errorf("give clone to uid %d: %w", uid, err)
	}
	return os.Chmod(clone, 0o700)
}

// killUserProcesses ends everything still running as the instance's uid
// once its server is stopped: programs its SQL started in the background
// would otherwise outlive it (and keep a mounted clone busy).
func killUserProcesses(ctx context.Context, st *State) error {
	if err := store.KillUserProcesses(ctx, st.UID, st.Dir); err != nil {
		return fmt.Errorf("end processes of instance %s: %w", st.ID, err)
	}
	return nil
}

// releaseUser gives the instance's uid back, once its dir is gone (its
// processes were killed before: killUserProcesses).
func releaseUser(st *State) error {
	return store.DropClaim(st.UID, st.Dir)
}
