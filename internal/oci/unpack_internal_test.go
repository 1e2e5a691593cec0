package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// memSource serves a hand-made artifact, so unpacking can be fed layers
// that Pack would never write.
type memSource struct {
	manifest ocispec.Descriptor
	blobs    map[digest.Digest][]byte
}

func (m *memSource) Resolve(context.Context, string) (ocispec.Descriptor, error) {
	return m.manifest, nil
}

func (m *memSource) Fetch(_ context.Context, d ocispec.Descriptor) (io.ReadCloser, error) {
	b, ok := m.blobs[d.Digest]
	if !ok {
		return nil, errs.NotFound("blob %s", d.Digest)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m *memSource) add(mediaType string, b []byte) ocispec.Descriptor {
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	m.blobs[d.Digest] = b
	return d
}

// tarEntry is a file or a part of one (off > 0 or short) in a layer.
type tarEntry struct {
	path string
	off  int64
	data []byte
}

func layerBlob(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.path, Size: int64(len(e.data)), Mode: 0o600, Format: tar.FormatPAX}
		if e.off > 0 {
			hdr.PAXRecords = map[string]string{paxOffset: strconv.FormatInt(e.off, 10)}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return buf.Bytes()
}

// artifactOf makes an artifact of files (path → content) with the given
// layers.
func artifactOf(t *testing.T, files map[string][]byte, layers ...[]byte) *memSource {
	t.Helper()
	key := strings.Repeat("ab", 32)
	m := &golden.Manifest{Key: key, Engine: "postgres", EngineVersion: "test"}
	list := []golden.File{{Path: "base", Mode: uint32(os.ModeDir | 0o700)}}
	for p, c := range files {
		sum := sha256.Sum256(c)
		list = append(list, golden.File{Path: p, Size: int64(len(c)), Mode: 0o600, SHA256: hex.EncodeToString(sum[:])})
	}
	m.SetFiles(list)
	return artifactFor(t, m, layers...)
}

// filesOf is m's file list (the test fails when it cannot be read).
func filesOf(t *testing.T, m *golden.Manifest) []golden.File {
	t.Helper()
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// artifactFor makes an artifact of golden manifest m with the given
// layers, keyed (annotation) as m is.
func artifactFor(t *testing.T, m *golden.Manifest, layers ...[]byte) *memSource {
	t.Helper()
	key := m.Key
	src := &memSource{blobs: map[digest.Digest][]byte{}}
	cfg, _ := json.Marshal(m)
	man := ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ManifestType, ArtifactType: ArtifactType,
		Config:      src.add(ConfigType, cfg),
		Annotations: map[string]string{AnnoKey: key, AnnoPlatform: Platform()}}
	for _, l := range layers {
		man.Layers = append(man.Layers, src.add(LayerType, l))
	}
	mdata, _ := json.Marshal(man)
	src.manifest = src.add(ManifestType, mdata)
	return src
}

// content of n bytes: random 4 KiB blocks with runs of zero blocks.
func content(seed int64, n int) []byte {
	rng := rand.New(rand.NewSource(seed))
	b := make([]byte, n)
	for off := 0; off < n; off += 4096 {
		if rng.Intn(3) > 0 {
			rng.Read(b[off:min(off+4096, n)])
		}
	}
	return b
}

func unpackStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(testenv.Dir(t), "s"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Files bigger than a span, a file split in parts across layers (its
// later part first), an empty file, zero blocks: unpacked in parallel
// with an early writeback every MiB, every byte comes back, zero blocks
// stay holes, and the golden verifies in full.
func TestUnpackParallelSpans(t *testing.T) {
	testenv.RequireRoot(t)
	files := map[string][]byte{"base/a": content(1, 3<<20+123), "base/big": content(2, 5<<20+4096*3), "base/empty": nil,
		"base/zeros": make([]byte, 2<<20)}
	// More small files than the writeback keeps descriptors for.
	var small []tarEntry
	for i := range maxFinished + 50 {
		p := fmt.Sprintf("base/s%03d", i)
		files[p] = content(int64(10+i), 5000)
		small = append(small, tarEntry{path: p, data: files[p]})
	}
	big := files["base/big"]
	cut := int64(2<<20 + 4096)
	src := artifactOf(t, files,
		layerBlob(t, tarEntry{path: "base/big", off: cut, data: big[cut:]}),
		layerBlob(t, append([]tarEntry{{path: "base/a", data: files["base/a"]}, {path: "base/empty"}, {path: "base/zeros", data: files["base/zeros"]}}, small...)...),
		layerBlob(t, tarEntry{path: "base/big", data: big[:cut]}))
	s := unpackStore(t)
	fds := openFiles(t)
	res, err := Unpack(context.Background(), s, src, "x", UnpackOptions{Parallel: 3, WritebackEvery: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t); n > fds {
		t.Errorf("%d descriptors open after the pull, %d before", n, fds)
	}
	verifyFull(t, res.Golden)
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(res.Golden.DataDir(), p))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs (%d bytes, want %d): %v", p, len(got), len(want), err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(res.Golden.DataDir(), "base/zeros"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 256<<10 {
		t.Errorf("a file of zeros owns %d bytes; its blocks should be holes", st.Blocks*512)
	}
}

func openFiles(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Layers Pack would never write are refused, whichever layer fails and
// however many are unpacked at once, and nothing is published or left.
func TestUnpackRefusesBadLayers(t *testing.T) {
	testenv.RequireRoot(t)
	a, b := content(3, 2<<20+5), content(4, 3<<20)
	files := map[string][]byte{"base/a": a, "base/b": b}
	good := layerBlob(t, tarEntry{path: "base/b", data: b})
	whole := layerBlob(t, tarEntry{path: "base/a", data: a})
	changed := bytes.Clone(a)
	changed[1<<20] ^= 1
	for name, tc := range map[string]struct {
		layers  [][]byte
		want    string
		corrupt bool // flip a byte of the last layer after its digest is taken
	}{
		"corrupt blob": {[][]byte{good, whole}, "does not match its digest", true},
		// The same range twice: the second copy's zero blocks would not
		// overwrite the first's data.
		"overlapping entries": {[][]byte{good, layerBlob(t, tarEntry{path: "base/a", data: a}, tarEntry{path: "base/a", off: 4096, data: make([]byte, 4096)})}, "overlap", false},
		"missing part":        {[][]byte{good, layerBlob(t, tarEntry{path: "base/a", data: a[:1<<20]})}, "holes", false},
		"content differs":     {[][]byte{good, layerBlob(t, tarEntry{path: "base/a", data: changed})}, "content differs", false},
		"too long":            {[][]byte{good, layerBlob(t, tarEntry{path: "base/a", off: 10, data: a})}, "larger than the manifest", false},
		"not in manifest":     {[][]byte{good, layerBlob(t, tarEntry{path: "base/a", data: a}, tarEntry{path: "base/c", data: a})}, "not a regular file of the golden's manifest", false},
	} {
		t.Run(name, func(t *testing.T) {
			s := unpackStore(t)
			src := artifactOf(t, files, tc.layers...)
			if tc.corrupt {
				last := bytes.Clone(tc.layers[len(tc.layers)-1])
				last[len(last)/2] ^= 0xff
				src.blobs[digest.FromBytes(tc.layers[len(tc.layers)-1])] = last
			}
			_, err := Unpack(context.Background(), s, src, "x", UnpackOptions{Parallel: 2, WritebackEvery: 1 << 20})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			assertNoGolden(t, s)
		})
	}
}

// A writer that fails mid-layer (the file cannot be created) stops the
// decoder feeding it, returns the writer's error, and publishes nothing.
func TestUnpackWriterFailure(t *testing.T) {
	testenv.RequireRoot(t)
	dir, err := openDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dir)
	x := &extraction{dir: dir, want: map[string]golden.File{"d/f": {Path: "d/f", Size: 8 << 20, Mode: 0o600}}, sums: newFileSums()}
	blob := layerBlob(t, tarEntry{path: "d/f", data: content(5, 8<<20)})
	zr, err := zstd.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	// "d" does not exist, so the writer cannot create d/f.
	err = x.extract(context.Background(), tar.NewReader(zr), nil, "test")
	if err == nil || !strings.Contains(err.Error(), "write golden file") {
		t.Fatalf("got %v, want the writer's error", err)
	}
}
