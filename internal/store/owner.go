package store

import (
	"os"
	"syscall"

	"github.com/dbfork/dbfork/internal/errs"
)

// CheckOwn refuses, for a user without root, to build or clone in a store
// that another user (root) made. By design goldens are private to the
// store's owner (mode 0700) and are not made readable to others: a user
// reaches a root store only through its daemon, which clones for them.
func (s *Store) CheckOwn() error {
	me := os.Geteuid()
	if me == 0 {
		return nil
	}
	for _, d := range []string{s.Root, s.GoldensDir(), s.LocksDir(), s.InstancesDir()} {
		fi, err := os.Stat(d)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != me {
			return errs.Invalid("store %s belongs to uid %d, not to you (uid %d), and its goldens are private to their owner; use it through a daemon that serves other users (`sudo dbfork serve --allow-users --store %s`), or a store of your own (drop --store and DBFORK_STORE for ~/.local/share/dbfork)",
				s.Root, st.Uid, me, s.Root)
		}
	}
	return nil
}
