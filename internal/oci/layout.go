package oci

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	orasoci "oras.land/oras-go/v2/content/oci"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// Export writes golden g as an OCI image layout in one tar file: the same
// artifact a push sends, for CI caches and machines without a registry.
// The file appears complete or not at all.
func Export(ctx context.Context, s *store.Store, g *golden.Golden, path string, o PackOptions) (st *Stats, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer func() {
		f.Close()
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	lt := &layoutTar{tw: tar.NewWriter(f), seen: map[string]bool{}}
	if err := lt.file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return nil, err
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := lt.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	st, mdata, err := Pack(ctx, s, g, lt, o)
	if err != nil {
		return nil, err
	}
	if err := lt.Push(ctx, st.Manifest, newBytesReader(mdata)); err != nil {
		return nil, err
	}
	desc := st.Manifest
	desc.Annotations = map[string]string{ocispec.AnnotationRefName: g.Key}
	idx, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{desc},
	})
	if err != nil {
		return nil, err
	}
	if err := lt.file("index.json", idx); err != nil {
		return nil, err
	}
	if err := lt.tw.Close(); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	// CreateTemp made the file 0600, and so it stays: a golden holds seed
	// data and role password hashes.
	if err := os.Rename(f.Name(), path); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return st, fsutil.SyncDir(dir)
}

// layoutTar is a Sink writing blobs into a layout tar.
type layoutTar struct {
	mu   sync.Mutex
	tw   *tar.Writer
	seen map[string]bool
}

func (l *layoutTar) Exists(_ context.Context, desc ocispec.Descriptor) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[desc.Digest.String()], nil
}

func (l *layoutTar) Push(_ context.Context, desc ocispec.Descriptor, r io.Reader) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[desc.Digest.String()] {
		return nil
	}
	name := "blobs/" + desc.Digest.Algorithm().String() + "/" + desc.Digest.Encoded()
	if err := l.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: desc.Size, Mode: 0o444, ModTime: epoch}); err != nil {
		return err
	}
	if n, err := io.Copy(l.tw, r); err != nil {
		return fmt.Errorf("write blob %s: %w", desc.Digest, err)
	} else if n != desc.Size {
		return fmt.Errorf("blob %s: %d bytes, want %d", desc.Digest, n, desc.Size)
	}
	l.seen[desc.Digest.String()] = true
	return nil
}

func (l *layoutTar) file(name string, data []byte) error {
	if err := l.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(data)), Mode: 0o444, ModTime: epoch}); err != nil {
		return err
	}
	_, err := l.tw.Write(data)
	return err
}

// Import reads a file written by Export (or any OCI layout tar holding
// one golden) into the store, verified and published like a pull.
func Import(ctx context.Context, s *store.Store, path string, o UnpackOptions) (*Unpacked, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, errs.NotFound("artifact file %s: %w", path, err)
	}
	src, err := orasoci.NewFromTar(ctx, path)
	if err != nil {
		return nil, errs.Invalid("%s is not an OCI image layout tar (written by `dbfork export`): %w", path, err)
	}
	var tags []string
	err = src.Tags(ctx, "", func(t []string) error {
		tags = append(tags, t...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(tags) != 1 {
		return nil, errs.Invalid("%s holds %d tagged artifacts; dbfork import wants exactly one (a file from `dbfork export`)", path, len(tags))
	}
	// `dbfork export` names the artifact by its key: it must be that.
	if golden.ValidKey(tags[0]) {
		o.WantKey = tags[0]
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	o.Origin = "import " + path
	return Unpack(ctx, s, src, tags[0], o)
}
