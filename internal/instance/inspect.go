package instance

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/fsutil"
)

// FileUse is one file of a clone that costs disk of its own.
type FileUse struct {
	Path         string `json:"path"` // relative to the data dir
	Size         int64  `json:"size"`
	PrivateBytes int64  `json:"private_bytes"` // not shared with the golden
	New          bool   `json:"new"`           // not in the golden at all
	CopiedUp     bool   `json:"copied_up"`     // overlay: copied into the upper dir
	Relation     string `json:"relation,omitempty"`
}

// Usage is what a clone owns: its files that diverged from the golden.
type Usage struct {
	ID           string    `json:"id"`
	Backend      string    `json:"backend"`
	PrivateBytes int64     `json:"private_bytes"`
	Files        []FileUse `json:"files"`
}

// Inspect lists the files of an instance's clone that cost disk of their
// own: where the backend keeps them apart (OverlayFS's upper dir) the files
// there (copied up or new), else
// the files with extents no longer shared with the golden, largest first.
// goldenData is the golden's data dir, to tell new files from changed ones.
func Inspect(st *State, goldenData string) (*Usage, error) {
	u := &Usage{ID: st.ID, Backend: st.Backend}
	root, apart := backend.Owned(st.cloneBackend(), st.DataDir, st.Scratch)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		priv, err := fsutil.PrivateBytes(p)
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		_, gerr := os.Lstat(filepath.Join(goldenData, rel))
		fu := FileUse{Path: rel, Size: fi.Size(), PrivateBytes: priv, New: gerr != nil}
		if apart {
			fu.CopiedUp = !fu.New
		} else if priv == 0 {
			return nil // still entirely shared with the golden
		}
		u.Files = append(u.Files, fu)
		u.PrivateBytes += priv
		return nil
	})
	sort.Slice(u.Files, func(i, j int) bool {
		if u.Files[i].PrivateBytes != u.Files[j].PrivateBytes {
			return u.Files[i].PrivateBytes > u.Files[j].PrivateBytes
		}
		return u.Files[i].Path < u.Files[j].Path
	})
	return u, err
}

// OwnedDir is the dir whose private bytes are what the instance's clone
// owns (see backend.Owned).
func OwnedDir(st *State) string {
	d, _ := backend.Owned(st.cloneBackend(), st.DataDir, st.Scratch)
	return d
}
