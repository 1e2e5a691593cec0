package fetch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/fsutil"
)

// ManifestFile is written last into an install dir: a dir without it is
// not an installed engine.
const ManifestFile = "dbfork-engine.json"

// Manifest describes one installed build.
type Manifest struct {
	Engine        string    `json:"engine"`
	Version       string    `json:"version"` // the package version (16.4.0)
	Arch          string    `json:"arch"`
	Server        string    `json:"server"` // what the server says it is (postgres -V)
	Bindir        string    `json:"bindir"` // where the binaries are, relative to the install dir
	Source        string    `json:"source"` // maven:GROUP:ARTIFACT:VERSION via ...
	ArchiveSHA256 string    `json:"archive_sha256"`
	ArchiveSHA1   string    `json:"archive_sha1"`
	Installed     time.Time `json:"installed"`
	Files         []File    `json:"files"`
}

// File is one entry of an installed tree.
type File struct {
	Path   string      `json:"path"`
	Mode   fs.FileMode `json:"mode"`
	Size   int64       `json:"size,omitempty"`
	SHA256 string      `json:"sha256,omitempty"`
	Link   string      `json:"link,omitempty"`
}

// listTree records every file of dir with its hash.
func listTree(dir string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := File{Path: rel, Mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			if f.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			f.Size = info.Size()
			if f.SHA256, err = fileSHA256(p); err != nil {
				return err
			}
		}
		files = append(files, f)
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, err
}

// check compares the tree with its manifest: every file present with
// its type, mode and size (full hashes when deep), nothing writable by
// others. Every `up`, `run` and build makes it, so each file is looked
// at relative to its open directory, not by a path walked from / again
// (fsutil.DirFDs); no component on the way may be a symlink, and a
// path that leaves the install is refused.
func (m *Manifest) check(dir string, deep bool) error {
	d, err := fsutil.OpenDirs(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, f := range m.Files {
		var st unix.Stat_t
		if err := d.Lstat(filepath.ToSlash(filepath.Clean(f.Path)), &st); err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
		mode := fsutil.FileMode(st.Mode)
		if mode != f.Mode {
			return fmt.Errorf("%s: mode %v, manifest says %v", f.Path, mode, f.Mode)
		}
		if mode.IsRegular() && st.Size != f.Size {
			return fmt.Errorf("%s: %d bytes, manifest says %d", f.Path, st.Size, f.Size)
		}
		if deep && f.SHA256 != "" {
			sum, err := fileSHA256(filepath.Join(dir, f.Path))
			if err != nil {
				return err
			}
			if sum != f.SHA256 {
				return fmt.Errorf("%s: content differs from the manifest", f.Path)
			}
		}
	}
	return nil
}

// BinDir is the absolute dir of the install's binaries.
func (in *Installed) BinDir() string {
	if in.Bindir == "" {
		return filepath.Join(in.Dir, "bin")
	}
	return filepath.Join(in.Dir, in.Bindir)
}

// readManifestHead reads a manifest's fields up to its file list, which
// publish writes last (Manifest's field order): enough to pick a build,
// without decoding the list of every cached build on every open (a
// PyPI PostgreSQL lists 2,000+ files, 430 KB of JSON; five cached builds
// took ~10 ms of each `dbfork up`). A manifest that lacks the fields a
// build is picked by before its files is read whole.
func readManifestHead(dir string) (*Manifest, error) {
	p := filepath.Join(dir, ManifestFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	head := []byte{'{'}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return readManifest(dir)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return readManifest(dir)
		}
		key, _ := t.(string)
		if key == "files" {
			break
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return readManifest(dir)
		}
		if len(head) > 1 {
			head = append(head, ',')
		}
		k, _ := json.Marshal(key)
		head = append(append(append(head, k...), ':'), v...)
	}
	var m Manifest
	if err := json.Unmarshal(append(head, '}'), &m); err != nil || m.Engine == "" || m.Version == "" || m.Arch == "" {
		return readManifest(dir)
	}
	return &m, nil
}

func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
