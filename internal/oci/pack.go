package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Sink receives an artifact's blobs: a registry repository or a layout
// tar. Exists lets a push skip blobs the sink already has.
type Sink interface {
	Exists(ctx context.Context, desc ocispec.Descriptor) (bool, error)
	Push(ctx context.Context, desc ocispec.Descriptor, content io.Reader) error
}

// PackOptions tune a push or an export.
type PackOptions struct {
	LargeFile int64 // files at least this big are layers of their own (0: DefaultLargeFile)
	// Progress gets one line per step (nil: silent).
	Progress func(string)
}

// Stats says what a push or export did.
type Stats struct {
	Manifest     ocispec.Descriptor `json:"manifest"`
	Layers       int                `json:"layers"`
	LayersSent   int                `json:"layers_sent"`
	BytesSent    int64              `json:"bytes_sent"`   // blob bytes uploaded (compressed)
	Compressed   int64              `json:"compressed"`   // all layers, compressed
	Uncompressed int64              `json:"uncompressed"` // the golden's files
	SentLayers   []string           `json:"sent_layers"`  // digests uploaded
	Seconds      float64            `json:"seconds"`
}

// epoch is the mtime of every tar entry: layer bytes depend on content only.
var epoch = time.Unix(0, 0).UTC()

// Pack sends golden g to sink: its layers (those the sink lacks), its
// config (the golden's manifest) and the OCI manifest, which it returns.
// The caller tags the manifest.
func Pack(ctx context.Context, s *store.Store, g *golden.Golden, sink Sink, o PackOptions) (*Stats, []byte, error) {
	start := time.Now()
	say := func(msg string) {
		if o.Progress != nil {
			o.Progress(msg)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(g.Dir, golden.ManifestName))
	if err != nil {
		return nil, nil, fmt.Errorf("read golden manifest: %w", err)
	}
	files, err := g.Manifest.Files()
	if err != nil {
		return nil, nil, fmt.Errorf("golden %s: bad manifest: %w", golden.Short(g.Key), err)
	}
	plans := planLayers(files, o.LargeFile)
	st := &Stats{Layers: len(plans), Uncompressed: g.Manifest.TotalBytes}
	cache := openLayerCache(s)
	defer cache.save()
	work, err := newPushDir(s)
	if err != nil {
		return nil, nil, fmt.Errorf("create push dir: %w", err)
	}
	defer fsutil.RemoveAll(work)

	layers := make([]ocispec.Descriptor, len(plans))
	var mu sync.Mutex
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(2)
	for i, p := range plans {
		eg.Go(func() error {
			desc, sent, err := sendLayer(ectx, g.DataDir(), p, sink, cache, work)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			layers[i] = desc
			st.Compressed += desc.Size
			if sent {
				st.LayersSent++
				st.BytesSent += desc.Size
				st.SentLayers = append(st.SentLayers, desc.Digest.String())
			}
			say(fmt.Sprintf("layer %d/%d %s", st.Compressed, st.Uncompressed, desc.Digest.Encoded()[:12]))
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, nil, err
	}
	cfgDesc := ocispec.Descriptor{MediaType: ConfigType, Digest: digest.FromBytes(cfg), Size: int64(len(cfg))}
	if sent, err := pushBytes(ctx, sink, cfgDesc, cfg); err != nil {
		return nil, nil, fmt.Errorf("push config: %w", err)
	} else if sent {
		st.BytesSent += cfgDesc.Size
	}
	man := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ManifestType,
		ArtifactType: ArtifactType,
		Config:       cfgDesc,
		Layers:       layers,
		Annotations:  artifactAnnotations(g.Manifest),
	}
	mdata, err := json.Marshal(man)
	if err != nil {
		return nil, nil, err
	}
	st.Manifest = ocispec.Descriptor{MediaType: ManifestType, ArtifactType: ArtifactType, Digest: digest.FromBytes(mdata), Size: int64(len(mdata))}
	st.Seconds = time.Since(start).Seconds()
	return st, mdata, nil
}

func artifactAnnotations(m *golden.Manifest) map[string]string {
	files, _ := m.Files() // read by Pack before
	return map[string]string{
		AnnoKey:        m.Key,
		AnnoEngine:     m.Engine,
		AnnoVersion:    m.EngineVersion,
		AnnoPlatform:   Platform(),
		AnnoFormat:     strconv.Itoa(m.Format),
		AnnoTotalBytes: strconv.FormatInt(m.TotalBytes, 10),
		AnnoFiles:      strconv.Itoa(len(files)),
		annoCreated:    m.Created.UTC().Format(time.RFC3339),
	}
}

// pushBytes sends a small blob unless the sink has it.
func pushBytes(ctx context.Context, sink Sink, desc ocispec.Descriptor, data []byte) (bool, error) {
	if ok, err := sink.Exists(ctx, desc); err != nil {
		return false, err
	} else if ok {
		return false, nil
	}
	return true, sink.Push(ctx, desc, bytes.NewReader(data))
}

// sendLayer makes one layer's blob (unless the cache knows its digest and
// the sink has it) and pushes it unless the sink has it.
func sendLayer(ctx context.Context, dataDir string, p *layerPlan, sink Sink, cache *layerCache, work string) (ocispec.Descriptor, bool, error) {
	id := p.id()
	if desc, ok := cache.get(id); ok {
		desc.Annotations = p.annotations()
		if has, err := sink.Exists(ctx, desc); err != nil {
			return desc, false, err
		} else if has {
			return desc, false, nil
		}
	}
	f, err := os.CreateTemp(work, "layer-")
	if err != nil {
		return ocispec.Descriptor{}, false, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	desc, err := writeLayer(ctx, dataDir, p, f)
	if err != nil {
		return desc, false, err
	}
	cache.put(id, desc)
	if has, err := sink.Exists(ctx, desc); err != nil {
		return desc, false, err
	} else if has {
		return desc, false, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return desc, false, err
	}
	if err := sink.Push(ctx, desc, f); err != nil {
		return desc, false, fmt.Errorf("push layer %s: %w", desc.Digest.Encoded()[:12], err)
	}
	return desc, true, nil
}

// writeLayer writes a layer's tar+zstd bytes to w and describes them.
// The bytes depend only on the pieces: sorted, fixed mtime and owner,
// one encoder goroutine (zstd output is then deterministic).
func writeLayer(ctx context.Context, dataDir string, p *layerPlan, w io.Writer) (ocispec.Descriptor, error) {
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	zw, err := zstd.NewWriter(cw, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	tw := tar.NewWriter(zw)
	for _, pc := range p.Pieces {
		if err := ctx.Err(); err != nil {
			return ocispec.Descriptor{}, err
		}
		if err := writePiece(tw, dataDir, pc); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := zw.Close(); err != nil {
		return ocispec.Descriptor{}, err
	}
	return ocispec.Descriptor{
		MediaType:   LayerType,
		Digest:      digest.NewDigestFromBytes(digest.SHA256, h.Sum(nil)),
		Size:        cw.n,
		Annotations: p.annotations(),
	}, nil
}

func writePiece(tw *tar.Writer, dataDir string, pc piece) error {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg, Name: pc.File.Path, Size: pc.Length,
		Mode: int64(fs.FileMode(pc.File.Mode).Perm()), ModTime: epoch, Format: tar.FormatPAX,
	}
	if pc.Length != pc.File.Size {
		hdr.PAXRecords = map[string]string{paxOffset: strconv.FormatInt(pc.Offset, 10)}
	}
	f, err := os.Open(filepath.Join(dataDir, pc.File.Path))
	if err != nil {
		return fmt.Errorf("read golden: %w", err)
	}
	defer f.Close()
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.NewSectionReader(f, pc.Offset, pc.Length))
	if err != nil {
		return fmt.Errorf("read golden %s: %w", pc.File.Path, err)
	}
	if n != pc.Length {
		return fmt.Errorf("golden file %s is shorter than its manifest says (run `dbfork verify`)", pc.File.Path)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func newBytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// newPushDir makes a scratch dir for compressed layers, named after this
// process, after removing those of pushes whose process is gone.
func newPushDir(s *store.Store) (string, error) {
	ReapPushDirs(s)
	if err := os.MkdirAll(s.CacheDir(), 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(s.CacheDir(), fmt.Sprintf("oci-push-%d-", os.Getpid()))
}

// ReapPushDirs removes the scratch dirs of pushes and exports that were
// killed (their process is gone), and returns their paths.
func ReapPushDirs(s *store.Store) []string {
	old, _ := filepath.Glob(filepath.Join(s.CacheDir(), "oci-push-*"))
	var out []string
	for _, d := range old {
		var pid int
		if _, err := fmt.Sscanf(filepath.Base(d), "oci-push-%d-", &pid); err == nil && pid > 0 && !alive(pid) {
			if fsutil.RemoveAll(d) == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

func alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}
