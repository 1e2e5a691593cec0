package golden

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// As root, each instance's server runs as a uid of its own (see
// store.ClaimUser) with the server user's group as a supplementary group.
// A golden's files are the server user's, and its group gets the owner's
// rights (0660 files, 0770 dirs), so every clone's server can use them —
// an OverlayFS clone reaches its lower files only through that group —
// while the data dir's root stays 0700: each clone's root is handed to
// its own uid, and nothing below it is reachable by anyone else. The
// golden itself stays behind its root-only dir.

// groupMode gives the group what the owner has.
func groupMode(m uint32) uint32 { return m | (m&0o700)>>3 }

// shareTree hands the tree below data over to u once the build's (or
// pull's) own processes are gone: with u the dropped server user (as
// root), every entry becomes u's with the owner's rights for the group
// too, and data itself u's; in every case no entry keeps a set-id bit
// (nor a file its sticky bit). The new modes go into m (when not nil).
//
// It refuses, changing nothing, a tree with an entry a golden cannot hold
// (a device, FIFO or socket, a file with other hard links) or one owned
// by anyone but data's owner (the build's uid) or u: root would give it
// to u. All of it goes through directory fds without following a
// symlink. Nobody but root may be able to change the tree meanwhile.
func shareTree(data string, m *Manifest, u store.User) error {
	dfd, err := fsutil.OpenDirNoFollow(data)
	if err != nil {
		return fmt.Errorf("share golden files with the servers' group: %w", err)
	}
	defer unix.Close(dfd)
	var top unix.Stat_t
	if err := unix.Fstat(dfd, &top); err != nil {
		return err
	}
	owners := map[uint32]bool{top.Uid: true}
	if u.Dropped() {
		owners[uint32(u.UID)] = true
	}
	// Look first, change after: a refused tree is left as it was.
	err = fsutil.WalkAt(dfd, func(_ int, _, rel string, st *unix.Stat_t) error {
		if why := badType(st.Mode, uint64(st.Nlink)); why != "" {
			return entryRefused(rel, why)
		}
		if !owners[st.Uid] {
			return entryRefused(rel, fmt.Sprintf("belongs to uid %d, not to the data dir's owner (uid %d, the build's)", st.Uid, top.Uid))
		}
		return nil
	})
	if err != nil {
		return err
	}
	changed := map[string]bool{}
	err = fsutil.WalkAt(dfd, func(dir int, name, rel string, st *unix.Stat_t) error {
		if u.Dropped() {
			if err := fsutil.ChownAt(dir, name, u.UID, u.GID); err != nil {
				return err
			}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil
		}
		mode := st.Mode & 0o777
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			mode |= st.Mode & unix.S_ISVTX
		}
		if u.Dropped() {
			mode = groupMode(mode)
		} else if mode == st.Mode&0o7777 {
			return nil // the user's own build: nothing to strip
		}
		if err := fsutil.ChmodAt(dir, name, mode); err != nil {
			return err
		}
		changed[rel] = true
		return nil
	})
	if err == nil && u.Dropped() {
		err = unix.Fchown(dfd, u.UID, u.GID)
	}
	if err != nil {
		return fmt.Errorf("share golden files with the servers' group: %w", err)
	}
	if m != nil {
		files, err := m.Files()
		if err != nil {
			return err
		}
		for i := range files { // in place: m's own list
			if changed[files[i].Path] {
				mode := stripMode(fs.FileMode(files[i].Mode))
				if u.Dropped() {
					mode = fs.FileMode(groupMode(uint32(mode)))
				}
				files[i].Mode = uint32(mode)
			}
		}
		m.GroupShared = m.GroupShared || u.Dropped()
	}
	return nil
}

var shareMu sync.Mutex

// Share brings a golden published before per-instance uids (files
// 0600/0700, the server user's alone) to the shared modes, once: the
// files and dirs first, then the manifest, atomically. A crash between
// the two is finished by the next call (the changes are the same). g's
// manifest in memory is updated too. Nothing happens unless dbfork runs
// as root.
func Share(s *store.Store, g *Golden) error {
	shareMu.Lock()
	defer shareMu.Unlock()
	if !s.User.Dropped() || g.Manifest.GroupShared {
		return nil
	}
	if disk, err := Lookup(s, g.Key); err == nil && disk.Manifest.GroupShared {
		*g.Manifest = *disk.Manifest // shared by another process meanwhile
		return nil
	}
	files, err := g.Manifest.Files()
	if err != nil {
		return fmt.Errorf("golden %s: bad manifest: %w", short(g.Key), err)
	}
	m := *g.Manifest
	m.SetFiles(append([]File(nil), files...))
	thawed, err := backend.ThawDataDir(g.DataDir())
	if err != nil {
		return fmt.Errorf("golden %s: make writable to share it: %w", short(g.Key), err)
	}
	err = shareTree(g.DataDir(), &m, s.User)
	if thawed {
		if ferr := backend.FreezeDataDir(g.DataDir()); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return fmt.Errorf("golden %s: %w", short(g.Key), err)
	}
	data, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(g.Dir, ManifestName), data, 0o644); err != nil {
		return err
	}
	*g.Manifest = m
	return nil
}
