package oci

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Source is where an artifact's blobs come from: a registry repository
// or a layout tar.
type Source interface {
	Resolve(ctx context.Context, ref string) (ocispec.Descriptor, error)
	Fetch(ctx context.Context, desc ocispec.Descriptor) (io.ReadCloser, error)
}

// EngineCheck says whether this machine runs the engine and exact server
// version a golden was built with, and returns it (an engine that is an
// engine.ArtifactChecker checks the pulled data dir's config), or why not.
type EngineCheck func(ctx context.Context, engine, version string) (engine.Engine, error)

// UnpackOptions tune a pull or an import.
type UnpackOptions struct {
	Check EngineCheck // nil: no check (tests of the format only)
	// MaxBytes caps the sum of the file sizes a golden declares (0:
	// DefaultMaxBytes); the store's free space caps it too.
	MaxBytes int64
	// WantKey, when set, is the key asked for (a tag that is a key, a
	// recipe's key): an artifact keyed otherwise is refused.
	WantKey string
	// Origin says where the golden comes from ("pull REGISTRY/REPO:TAG",
	// "import FILE"); "@" and the manifest digest are added.
	Origin   string
	Log      *slog.Logger
	Progress func(string)
	OnWait   func() // another process is pulling or building the same key
	// Locked: the caller holds the key's build lock (a pull from inside
	// golden.Build).
	Locked bool
	// Parallel is how many layers are unpacked at once (0: as many as
	// there are cores, at most 4).
	Parallel int
	// WritebackEvery: each time that many more bytes have been written,
	// the pull's files are flushed in the background, so the disk works
	// while layers decompress (0: every 32 MiB; < 0: only by the final
	// syncfs).
	WritebackEvery int64
}

func (o *UnpackOptions) defaults() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Parallel < 1 {
		o.Parallel = min(runtime.GOMAXPROCS(0), 4)
	}
	if o.WritebackEvery == 0 {
		o.WritebackEvery = 32 << 20
	}
}

// Unpacked says what a pull or import did.
type Unpacked struct {
	Golden     *golden.Golden `json:"-"`
	Key        string         `json:"key"`
	Manifest   string         `json:"manifest_digest"`
	Downloaded bool           `json:"downloaded"` // false: the store had it
	Bytes      int64          `json:"bytes"`      // blob bytes read
	Seconds    float64        `json:"seconds"`
}

// artifact is a fetched and checked OCI manifest with its golden manifest.
type artifact struct {
	desc   ocispec.Descriptor
	man    ocispec.Manifest
	golden *golden.Manifest
	files  []golden.File // golden's, decoded with it
}

// Unpack fetches the artifact ref names from src into store s, verified,
// and publishes it like a build. A store that has the key already is
// left alone.
func Unpack(ctx context.Context, s *store.Store, src Source, ref string, o UnpackOptions) (*Unpacked, error) {
	start := time.Now()
	o.defaults()
	a, err := fetchArtifact(ctx, src, ref)
	if err != nil {
		return nil, err
	}
	key := a.golden.Key
	if o.WantKey != "" && key != o.WantKey {
		return nil, errs.Conflict("the artifact named %s is golden %s: a golden is only taken under its own key; refused, nothing was published", golden.Short(o.WantKey), golden.Short(key))
	}
	var eng engine.Engine
	if o.Check != nil {
		if eng, err = o.Check(ctx, a.golden.Engine, a.golden.EngineVersion); err != nil {
			return nil, err
		}
	}
	res := &Unpacked{Key: key, Manifest: a.desc.Digest.String()}
	if !o.Locked {
		g, release, err := golden.Claim(ctx, s, key, o.OnWait, o.Log)
		if err != nil {
			return nil, err
		}
		if g != nil {
			res.Golden, res.Seconds = g, time.Since(start).Seconds()
			return res, nil
		}
		defer release()
	} else if g, err := golden.Lookup(s, key); err == nil {
		res.Golden = g
		return res, nil
	}
	if err := checkSizes(s, a.golden, o.MaxBytes); err != nil {
		return nil, err
	}
	g, n, err := unpackLocked(ctx, s, src, a, eng, o)
	if err != nil {
		return nil, err
	}
	res.Golden, res.Downloaded, res.Bytes, res.Seconds = g, true, n, time.Since(start).Seconds()
	return res, nil
}

// fetchArtifact resolves ref and checks that it is a golden this
// platform can use.
func fetchArtifact(ctx context.Context, src Source, ref string) (*artifact, error) {
	desc, err := src.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if desc.MediaType != ManifestType {
		return nil, errs.Invalid("%s is a %s, not a dbfork golden (an OCI manifest of type %s)", ref, desc.MediaType, ArtifactType)
	}
	data, err := fetchAll(ctx, src, desc, 4<<20)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest: %w", err)
	}
	a := &artifact{desc: desc}
	if err := json.Unmarshal(data, &a.man); err != nil {
		return nil, errs.Invalid("%s: bad OCI manifest: %w", ref, err)
	}
	if a.man.ArtifactType != ArtifactType || a.man.Config.MediaType != ConfigType {
		return nil, errs.Invalid("%s is not a dbfork golden (artifact type %q, want %s)", ref, a.man.ArtifactType, ArtifactType)
	}
	if p := a.man.Annotations[AnnoPlatform]; p != Platform() {
		return nil, errs.Unsupported("golden %s was built on %s; data files of this machine's %s are not compatible", ref, p, Platform())
	}
	cfg, err := fetchAll(ctx, src, a.man.Config, 64<<20)
	if err != nil {
		return nil, fmt.Errorf("fetch golden manifest: %w", err)
	}
	a.golden = &golden.Manifest{}
	if err := json.Unmarshal(cfg, a.golden); err != nil {
		return nil, errs.Invalid("%s: bad golden manifest: %w", ref, err)
	}
	if k := a.golden.Key; !golden.ValidKey(k) || k != a.man.Annotations[AnnoKey] {
		return nil, errs.Invalid("%s: the golden manifest's key %q differs from the artifact's %q", ref, k, a.man.Annotations[AnnoKey])
	}
	if a.files, err = a.golden.Files(); err != nil {
		return nil, errs.Invalid("%s: bad golden manifest: %w", ref, err)
	}
	if err := checkFiles(a.files); err != nil {
		return nil, errs.Invalid("%s: %w", ref, err)
	}
	return a, nil
}

// fetchAll reads a small blob and checks its size and digest.
func fetchAll(ctx context.Context, src Source, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size > limit || desc.Size < 0 {
		return nil, errs.Invalid("blob %s is %d bytes, more than the %d allowed", desc.Digest, desc.Size, limit)
	}
	if err := desc.Digest.Validate(); err != nil {
		return nil, errs.Invalid("bad digest %q: %w", desc.Digest, err)
	}
	rc, err := src.Fetch(ctx, desc)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != desc.Size || digest.FromBytes(data) != desc.Digest {
		return nil, corrupt(desc)
	}
	return data, nil
}

func corrupt(desc ocispec.Descriptor) error {
	return errs.Conflict("blob %s does not match its digest (corrupt in the registry or in transit); nothing was published", desc.Digest)
}

// unpackLocked downloads into a tmp- dir, verifies, and publishes.
func unpackLocked(ctx context.Context, s *store.Store, src Source, a *artifact, eng engine.Engine, o UnpackOptions) (g *golden.Golden, n int64, err error) {
	tmp, err := golden.NewWorkDir(s, a.golden.Key)
	defer func() {
		if err != nil && tmp != "" {
			if rerr := golden.Discard(tmp); rerr != nil {
				o.Log.Warn("could not remove failed pull dir; `dbfork gc` will", "dir", tmp, "err", rerr)
			}
		}
	}()
	if err != nil {
		return nil, 0, err
	}
	t := newPhases()
	data := filepath.Join(tmp, "data")
	dir, err := openDataDir(data)
	if err != nil {
		return nil, 0, err
	}
	defer unix.Close(dir)
	if err := makeTree(dir, a.files); err != nil {
		return nil, 0, err
	}
	if testHookTree != nil {
		testHookTree(tmp)
	}
	x := &extraction{dir: dir, want: map[string]golden.File{}, sums: newFileSums()}
	for _, f := range a.files {
		if fs.FileMode(f.Mode).IsRegular() {
			x.want[f.Path] = f
		}
	}
	if o.WritebackEvery > 0 {
		x.wb = startWriteback(o.WritebackEvery)
	}
	counts, err := unpackLayers(ctx, src, a.man.Layers, x, o)
	if x.wb != nil {
		if werr := x.wb.close(); err == nil {
			err = werr
		}
	}
	if err != nil {
		return nil, 0, err
	}
	for _, c := range counts {
		n += c
	}
	t.mark("layers")
	copies, err := x.makeCopies()
	if err != nil {
		return nil, n, err
	}
	if err := x.sums.covered(x.want); err != nil {
		return nil, n, err
	}
	if eng != nil {
		if err := checkArtifact(dir, eng, a.golden); err != nil {
			return nil, n, err
		}
	}
	if err := finishTree(dir, a.files, s.User); err != nil {
		return nil, n, err
	}
	faults.At("pull:downloaded")
	if err := verifyPulled(tmp, a.golden, x.sums, copies); err != nil {
		return nil, n, err
	}
	t.mark("verify")
	// One syncfs makes every file durable before the manifest is written.
	if err := syncFS(data); err != nil {
		return nil, n, err
	}
	t.mark("syncfs")
	if err := golden.WriteOrigin(tmp, o.Origin+"@"+a.desc.Digest.String()); err != nil {
		return nil, n, err
	}
	g, err = golden.Publish(s, tmp, a.golden, "pull")
	if err != nil {
		return nil, n, err
	}
	t.mark("publish")
	o.Log.Debug("pulled", t.attrs()...)
	tmp = ""
	return g, n, nil
}

// unpackLayers unpacks o.Parallel layers at a time (each is decoded in
// one goroutine and hashed and written in another), the biggest first, so
// a big layer never starts last and runs alone.
func unpackLayers(ctx context.Context, src Source, layers []ocispec.Descriptor, x *extraction, o UnpackOptions) ([]int64, error) {
	order := make([]int, len(layers))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return layers[order[i]].Size > layers[order[j]].Size })
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(max(1, o.Parallel))
	counts := make([]int64, len(layers))
	var finished atomic.Int64
	for _, i := range order {
		eg.Go(func() error {
			c, err := unpackLayer(ectx, src, layers[i], x)
			counts[i] = c
			if err == nil && o.Progress != nil {
				o.Progress(fmt.Sprintf("layer %d/%d", finished.Add(1), len(layers)))
			}
			faults.At("pull:layer")
			return err
		})
	}
	return counts, eg.Wait()
}

// unpackLayer streams one layer into the data dir, and then checks the
// blob's digest: whatever it wrote stays in the tmp- dir until then.
func unpackLayer(ctx context.Context, src Source, desc ocispec.Descriptor, x *extraction) (int64, error) {
	if desc.MediaType != LayerType {
		return 0, errs.Invalid("layer %s has media type %q, want %s", desc.Digest, desc.MediaType, LayerType)
	}
	if err := desc.Digest.Validate(); err != nil || desc.Digest.Algorithm() != digest.SHA256 {
		return 0, errs.Invalid("layer digest %q is not a sha256 digest", desc.Digest)
	}
	rc, err := src.Fetch(ctx, desc)
	if err != nil {
		return 0, fmt.Errorf("fetch layer %s: %w", desc.Digest.Encoded()[:12], err)
	}
	defer rc.Close()
	v := desc.Digest.Verifier()
	cr := &countReader{r: io.TeeReader(io.LimitReader(rc, desc.Size+1), v)}
	// zstd's own frame checksum is not checked: the blob's sha256 above
	// and every file's sha256 cover the same bytes, and skipping it saves
	// a tenth of a pull's CPU.
	zr, err := zstd.NewReader(cr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20), zstd.IgnoreChecksum(true))
	if err != nil {
		return 0, err
	}
	defer zr.Close()
	extractErr := x.extract(ctx, tar.NewReader(zr), cr, desc.Digest.Encoded()[:12])
	// Read to the end, so the digest covers the whole blob.
	if _, err := io.Copy(io.Discard, cr); err != nil && extractErr == nil {
		return cr.read(), fmt.Errorf("fetch layer %s: %w", desc.Digest.Encoded()[:12], err)
	}
	if cr.read() != desc.Size || !v.Verified() {
		return cr.read(), corrupt(desc)
	}
	return cr.read(), extractErr
}

// checkFiles refuses a golden manifest whose paths could reach outside
// the data dir: every path clean and relative, every parent a directory
// of the manifest, only dirs, regular files and symlinks.
func checkFiles(files []golden.File) error {
	kinds := map[string]fs.FileMode{}
	for _, f := range files {
		if f.Path == "" || f.Path != filepath.Clean(f.Path) || filepath.IsAbs(f.Path) || f.Path == ".." || strings.HasPrefix(f.Path, "../") {
			return fmt.Errorf("golden manifest names a bad path %q", f.Path)
		}
		t := fs.FileMode(f.Mode).Type()
		if t != 0 && t != fs.ModeDir && t != fs.ModeSymlink {
			return fmt.Errorf("golden manifest holds %q of type %v", f.Path, t)
		}
		if _, dup := kinds[f.Path]; dup {
			return fmt.Errorf("golden manifest names %q twice", f.Path)
		}
		if f.Size < 0 {
			return fmt.Errorf("golden manifest gives %q a negative size", f.Path)
		}
		// No set-id bit, device, FIFO or socket: the rule a build's
		// hand-over applies, before anything is written.
		if err := golden.CheckFile(f); err != nil {
			return err
		}
		kinds[f.Path] = t
	}
	for _, f := range files {
		if dir := filepath.Dir(f.Path); dir != "." && kinds[dir] != fs.ModeDir {
			return fmt.Errorf("golden manifest: the parent of %q is not one of its directories", f.Path)
		}
	}
	return nil
}

// countReader counts what it reads; the layer's writer reads the count
// from its own goroutine.
type countReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countReader) read() int64 { return c.n.Load() }
