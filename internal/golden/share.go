package golden

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
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

// shareTree gives every entry below data (not data itself) to u with the
// owner's rights for the group, without following symlinks, and records
// the new modes in m (when not nil). Nobody but root may be able to
// change the tree meanwhile: the build's own uid has no process left.
func shareTree(data string, m *Manifest, u store.User) error {
	modes := map[string]uint32{}
	err := filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if err := os.Lchown(p, u.UID, u.GID); err != nil {
			return err
		}
		if p == data || st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return nil
		}
		// chown cleared any set-id bit: the mode is set again in full.
		if err := fsutil.ChmodNoFollow(p, groupMode(st.Mode&0o7777)); err != nil {
			return err
		}
		rel, _ := filepath.Rel(data, p)
		modes[rel] = 0
		return nil
	})
	if err != nil {
		return fmt.Errorf("share golden files with the servers' group: %w", err)
	}
	if m != nil {
		for i := range m.Files {
			if _, ok := modes[m.Files[i].Path]; ok {
				m.Files[i].Mode = groupMode(m.Files[i].Mode)
			}
		}
		m.GroupShared = true
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
	m := *g.Manifest
	m.Files = append([]File(nil), g.Manifest.Files...)
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
