package cli

import (
	"os"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/store"
)

// openOwnStore opens the store for commands that build or clone in it
// themselves: a user without root gets one line instead of a permission
// error deep inside when the store is root's (store.CheckOwn).
func (g *globals) openOwnStore() (*store.Store, error) {
	s, err := g.openStore()
	if err != nil {
		return nil, err
	}
	if err := s.CheckOwn(); err != nil {
		return nil, err
	}
	return s, nil
}

// firstWriteTrap is said by `up` and `doctor` where a clone copies a whole
// file on its first write (OverlayFS on a store that cannot reflink).
const firstWriteTrap = "first-write trap: this store cannot reflink, so the first write to a table copies its whole file (seconds for a GB table); " +
	"list such tables in the recipe's [pool] hot so a pool copies them ahead, or put the store on XFS (reflink=1) or btrfs"

// rootlessFastStore is how a user without root gets block-level first
// writes.
const rootlessFastStore = "without root, point the store at an XFS (reflink=1) or btrfs filesystem you own (DBFORK_STORE=/that/fs/dbfork: auto then picks reflink or btrfs), " +
	"or ask an admin once to mount one (a loop image will do) at a dir you own"

// rootlessAdvice is doctor's one line per problem of a store used
// without root: user namespaces blocked, a store on NFS or tmpfs.
func rootlessAdvice(rep doctorReport) []string {
	var out []string
	switch rep.Store.FS {
	case "nfs":
		out = append(out, "the store is on NFS: OverlayFS cannot use it as an upper dir, extents cannot be shared and locks are unreliable; put the store on a local disk (DBFORK_STORE=/local/path)")
	case "tmpfs":
		out = append(out, "the store is on tmpfs: goldens live in memory and vanish at reboot, and clones cannot share extents; put the store on a disk (DBFORK_STORE=/local/path) unless that is what you want")
	}
	if os.Geteuid() != 0 {
		if why := backend.UsernsBlocked(backend.SysctlDir); why != "" {
			out = append(out, "rootless OverlayFS clones are unavailable: "+why)
		}
	}
	return out
}
