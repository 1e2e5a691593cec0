package golden

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// ManifestName is written last into a golden; a golden without it does
// not exist.
const ManifestName = "manifest.json"

// UsageName is the file beside the manifest saying what the golden takes
// on this store's disk ({"disk_bytes": N}), written when it is published.
const UsageName = "usage.json"

// usage is the content of UsageName.
type usage struct {
	DiskBytes int64 `json:"disk_bytes"`
}

// Manifest describes a complete golden.
type Manifest struct {
	Format        int               `json:"format"`
	Key           string            `json:"key"`
	Engine        string            `json:"engine"`
	EngineVersion string            `json:"engine_version"`
	InitOptions   map[string]string `json:"init_options"`
	Recipe        string            `json:"recipe"`
	Database      string            `json:"database"`
	Owner         string            `json:"owner"`
	Inputs        []Input           `json:"inputs"`
	Commands      []string          `json:"commands,omitempty"`
	Created       time.Time         `json:"created"`
	BuildSeconds  float64           `json:"build_seconds"`
	TotalBytes    int64             `json:"total_bytes"`
	// DiskBytes is what the data dir's files take on this store's disk,
	// blocks they share with one another counted once (a golden with
	// slots: its database 1+N times in TotalBytes, about once here). It
	// depends on the store, not on the data, so it is kept beside the
	// manifest (UsageName), never in it: a pushed manifest is the same
	// from every store. 0 where unknown (Disk then says TotalBytes).
	DiskBytes int64 `json:"-"`
	// files are the data dir's files ("files" in JSON, written last:
	// MarshalJSON); a manifest read from a golden's dir decodes them on
	// first use (list; see Files).
	files []File
	list  *fileList
	// GroupShared: the files are the server user's, with the owner's
	// rights given to its group too (see Share), as every golden made as
	// root since per-instance uids.
	GroupShared bool `json:"group_shared,omitempty"`
	// Intermediate marks the saved state of a build after one of its
	// steps (see steps.go), kept under that step's key only for later
	// builds of the recipe to start from: never a golden to clone.
	Intermediate *StepState `json:"intermediate,omitempty"`
	// StepKeys are the keys of the steps that made it, in order (for an
	// intermediate, its own steps): gc keeps the intermediates a kept
	// golden was built through.
	StepKeys []string `json:"step_keys,omitempty"`
	// ReusedSteps is how many leading steps came from an intermediate
	// golden instead of running.
	ReusedSteps int `json:"reused_steps,omitempty"`
	// Slots are copies of Database made at build time ([fresh] slots):
	// a lease hands out one per fresh call.
	Slots []string `json:"slots,omitempty"`
	// SlotDirs say where each slot's files are in the data dir, in the
	// order of Slots (PostgreSQL: base/<oid>). An instance whose slots
	// no one hands out (one made outside the daemon) closes them and
	// checks the golden without these dirs: ClosableSlots. Absent in
	// goldens built before they were recorded: those are checked whole.
	SlotDirs []string `json:"slot_dirs,omitempty"`
}

// Files are the golden's files. A manifest read from disk (Lookup) holds
// them as read and decodes them on first use: most lookups never need
// them (a 32-slot golden lists 11,300 files, 1.9 MB of JSON, and `dbfork
// up` spent 6-12 ms decoding them before cloning). The error says the
// list is not what a manifest holds; the manifest is then bad.
func (m *Manifest) Files() ([]File, error) {
	if m.list == nil {
		return m.files, nil
	}
	return m.list.all()
}

// SetFiles sets the golden's file list.
func (m *Manifest) SetFiles(files []File) { m.files, m.list = files, nil }

// manifestFields is Manifest without its methods (so without the file
// list, which MarshalJSON and UnmarshalJSON add).
type manifestFields Manifest

// MarshalJSON writes the manifest with its file list last (everything
// else comes first, a few hundred bytes, however long the list), and the
// slots' files at the end of the list (slotFilesLast), whoever made it:
// decodeManifest counts on both when slot_dirs come first.
func (m Manifest) MarshalJSON() ([]byte, error) {
	files, err := m.Files()
	if err != nil {
		return nil, err
	}
	files = slotFilesLast(files, m.SlotDirs)
	if files == nil {
		files = []File{}
	}
	head, err := json.Marshal(manifestFields(m))
	if err != nil {
		return nil, err
	}
	list, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(head)+len(list)+16)
	out = append(out, head[:len(head)-1]...) // without its '}'
	if len(head) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"files":`...)
	out = append(append(out, list...), '}')
	return out, nil
}

// UnmarshalJSON reads a manifest, its file list included (decodeManifest
// leaves the list to be decoded on first use instead).
func (m *Manifest) UnmarshalJSON(data []byte) error {
	var v struct {
		*manifestFields
		Files []File `json:"files"`
	}
	v.manifestFields = (*manifestFields)(m)
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	m.files, m.list = v.Files, nil
	return nil
}

// StepState says which state of its recipe an intermediate golden holds.
type StepState struct {
	Step  int `json:"step"`  // steps 1..Step have run
	Steps int `json:"steps"` // of this many in the recipe
}

// File is one file of the golden's data dir.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
	SHA256 string `json:"sha256,omitempty"` // regular files
	Link   string `json:"link,omitempty"`   // symlinks
}

// Disk is what the golden takes on disk as far as its manifest knows:
// DiskBytes where recorded, else TotalBytes. Budgets, listings and gc
// count this, not the apparent size.
func (m *Manifest) Disk() int64 {
	if m.DiskBytes > 0 {
		return m.DiskBytes
	}
	return m.TotalBytes
}

// Golden is a published golden.
type Golden struct {
	Key      string
	Dir      string
	Manifest *Manifest
}

// DataDir is the frozen data directory clones are made from.
func (g *Golden) DataDir() string { return filepath.Join(g.Dir, "data") }

// Lookup returns the golden with this key, or an ErrNotFound error.
func Lookup(s *store.Store, key string) (*Golden, error) {
	if !validKey(key) {
		return nil, errs.Invalid("golden key %q is not a sha256 hex string", key)
	}
	dir := s.GoldenDir(key)
	data, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.NotFound("golden %s not found (run `dbfork build`)", short(key))
	}
	if err != nil {
		return nil, err
	}
	m, err := decodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("golden %s: bad manifest: %w (remove it with `dbfork gc` and rebuild)", short(key), err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, UsageName)); err == nil {
		var u usage
		if json.Unmarshal(b, &u) == nil {
			m.DiskBytes = u.DiskBytes
		}
	}
	return &Golden{Key: key, Dir: dir, Manifest: m}, nil
}

// Find resolves a unique key prefix (at least 6 characters).
func Find(s *store.Store, prefix string) (*Golden, error) {
	if validKey(prefix) {
		return Lookup(s, prefix)
	}
	if len(prefix) < 6 || strings.Trim(prefix, "0123456789abcdef") != "" {
		return nil, errs.Invalid("golden %q: give a key or a prefix of at least 6 hex digits", prefix)
	}
	all, err := List(s)
	if err != nil {
		return nil, err
	}
	var match []*Golden
	for _, g := range all {
		if strings.HasPrefix(g.Key, prefix) {
			match = append(match, g)
		}
	}
	switch len(match) {
	case 0:
		return nil, errs.NotFound("no golden with key prefix %s", prefix)
	case 1:
		return match[0], nil
	}
	return nil, errs.Invalid("key prefix %s is ambiguous (%d goldens); give more digits", prefix, len(match))
}

// List returns every complete golden, newest first.
func List(s *store.Store) ([]*Golden, error) {
	entries, err := os.ReadDir(s.GoldensDir())
	if err != nil {
		return nil, err
	}
	var out []*Golden
	for _, e := range entries {
		if !e.IsDir() || !validKey(e.Name()) {
			continue
		}
		g, err := Lookup(s, e.Name())
		if err != nil {
			continue // incomplete: invisible, gc removes it
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Manifest.Created.After(out[j].Manifest.Created) })
	return out, nil
}

// Unreadable counts goldens this process may not look into (root-only
// goldens, seen by another user), so `ls` can say they exist.
func Unreadable(s *store.Store) int {
	entries, _ := os.ReadDir(s.GoldensDir())
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !validKey(e.Name()) {
			continue
		}
		if _, err := os.Stat(filepath.Join(s.GoldensDir(), e.Name(), ManifestName)); errors.Is(err, os.ErrPermission) {
			n++
		}
	}
	return n
}

func validKey(k string) bool {
	return len(k) == 64 && strings.Trim(k, "0123456789abcdef") == ""
}

func short(k string) string {
	if len(k) > 12 {
		return k[:12]
	}
	return k
}

// listFiles walks a data dir, hashing and fsyncing every regular file
// (two at a time: one core hashes while the other waits on the disk).
func listFiles(root string) ([]File, int64, error) { return listFilesKnown(root, nil) }

// listFilesKnown is listFiles for a data dir some of whose files are known
// to hold content of a known sha256 (known: path -> sum; see
// unchangedSums): those are fsynced, not read.
func listFilesKnown(root string, known map[string]string) ([]File, int64, error) {
	var files []File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := refuseEntry(rel, fi); err != nil {
			return err
		}
		f := File{Path: rel, Mode: uint32(fi.Mode())}
		switch {
		case fi.Mode().IsRegular():
			f.Size = fi.Size()
		case fi.Mode()&fs.ModeSymlink != 0:
			f.Link, _ = os.Readlink(p)
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	var total int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, 2)
	sum := func(f *File, known string) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			sum, err := syncAndSum(filepath.Join(root, f.Path), known)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			f.SHA256 = sum
		}()
	}
	// A file in the same blocks as a file of the same name and size
	// already summed (a slot's copy of its database's file: shareTwins)
	// has its sum: those go second, and only files without such a twin
	// are read.
	var later []int
	seen := map[string]bool{}
	for i := range files {
		if !fs.FileMode(files[i].Mode).IsRegular() {
			continue
		}
		total += files[i].Size
		k := twinKey(filepath.Base(files[i].Path), files[i].Size)
		if seen[k] && known[files[i].Path] == "" && files[i].Size >= 8192 {
			later = append(later, i)
			continue
		}
		seen[k] = true
		sum(&files[i], known[files[i].Path])
	}
	wg.Wait()
	if firstErr != nil {
		return files, total, firstErr
	}
	summed := map[string][]int{}
	for i := range files {
		if fs.FileMode(files[i].Mode).IsRegular() && files[i].SHA256 != "" {
			k := twinKey(filepath.Base(files[i].Path), files[i].Size)
			if len(summed[k]) < maxTwinSources {
				summed[k] = append(summed[k], i)
			}
		}
	}
	for _, i := range later {
		f := &files[i]
		k := twinKey(filepath.Base(f.Path), f.Size)
		twinSum := ""
		for _, j := range summed[k] {
			if fsutil.SameBlocksPath(filepath.Join(root, files[j].Path), filepath.Join(root, f.Path)) {
				twinSum = files[j].SHA256
				break
			}
		}
		sum(f, twinSum)
	}
	wg.Wait()
	return files, total, firstErr
}

func syncAndSum(p, known string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("fsync %s: %w", p, err)
	}
	if known != "" {
		return known, nil
	}
	return fileSum(p)
}
