package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// pushSource stores a hand-made artifact in a real registry under tag.
func pushSource(t *testing.T, r Registry, repoRef, tag string, src *memSource) {
	t.Helper()
	ctx := context.Background()
	repo, _, err := r.repository(repoRef)
	if err != nil {
		t.Fatal(err)
	}
	for d, b := range src.blobs {
		if d == src.manifest.Digest {
			continue
		}
		desc := ocispec.Descriptor{MediaType: "application/octet-stream", Digest: d, Size: int64(len(b))}
		if err := repo.Blobs().Push(ctx, desc, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := repo.PushReference(ctx, src.manifest, bytes.NewReader(src.blobs[src.manifest.Digest]), tag); err != nil {
		t.Fatal(err)
	}
}

// writeLayout writes a hand-made artifact as an OCI layout tar whose one
// manifest is named ref (what `dbfork export` writes, with any key).
func writeLayout(t *testing.T, src *memSource, ref, path string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	for d, b := range src.blobs {
		add("blobs/sha256/"+d.Encoded(), b)
	}
	desc := src.manifest
	desc.Annotations = map[string]string{ocispec.AnnotationRefName: ref}
	idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{desc}})
	add("index.json", idx)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// streamEntry is a layer entry of size bytes made by fill (for entries
// too big to hold in memory).
type streamEntry struct {
	path      string
	off, size int64
	fill      func(off int64, p []byte)
}

// streamLayer compresses entries into a layer blob without holding their
// content.
func streamLayer(t *testing.T, entries ...streamEntry) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := zstd.NewWriter(&out)
	tw := tar.NewWriter(zw)
	buf := make([]byte, 1<<20)
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.path, Size: e.size, Mode: 0o600, Format: tar.FormatPAX}
		if e.off > 0 {
			hdr.PAXRecords = map[string]string{paxOffset: itoa64(e.off)}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		for done := int64(0); done < e.size; {
			n := min(int64(len(buf)), e.size-done)
			e.fill(done, buf[:n])
			if _, err := tw.Write(buf[:n]); err != nil {
				t.Fatal(err)
			}
			done += n
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	return out.Bytes()
}

func itoa64(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
