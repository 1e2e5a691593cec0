// Package oci turns goldens into OCI artifacts and back: pushed to and
// pulled from registries (over oras-go), or written to and read from one
// file (an OCI image layout in a tar). See docs/oci.md for the format.
package oci

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"io/fs"
	"runtime"
	"sort"

	"github.com/dbfork/dbfork/internal/golden"
)

// Media types and the artifact type of a golden.
const (
	ArtifactType   = "application/vnd.dbfork.golden.v1"
	ConfigType     = "application/vnd.dbfork.golden.config.v1+json"
	LayerType      = "application/vnd.dbfork.golden.layer.v1.tar+zstd"
	ManifestType   = "application/vnd.oci.image.manifest.v1+json"
	annoPrefix     = "dev.dbfork.golden."
	AnnoKey        = annoPrefix + "key"
	AnnoEngine     = annoPrefix + "engine"
	AnnoVersion    = annoPrefix + "server-version"
	AnnoPlatform   = annoPrefix + "platform"
	AnnoFormat     = annoPrefix + "format"
	AnnoTotalBytes = annoPrefix + "total-bytes"
	AnnoFiles      = annoPrefix + "files"
	AnnoLayerFiles = "dev.dbfork.layer.files"
	AnnoLayerChunk = "dev.dbfork.layer.chunk"
	annoCreated    = "org.opencontainers.image.created"
	// paxOffset marks a tar entry holding part of a file, from this offset.
	paxOffset = "DBFORK.offset"
)

// Layout limits. Files of LargeFile bytes or more are layers of their own
// (every PostgreSQL 1 GiB segment, every big .ibd), split into chunks of
// at most MaxLayer; smaller files are grouped.
const (
	DefaultLargeFile = 64 << 20
	MaxLayer         = 1 << 30
	// A group of small files ends before a file whose path hashes to 0
	// modulo groupEvery, or when it would pass LargeFile bytes. Cutting
	// on path hashes keeps the other groups' boundaries (and blobs) when
	// one file grows or shrinks.
	groupEvery = 32
)

// Platform is the OS/architecture data files are tied to.
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// piece is a regular file, or a part of one, in a layer.
type piece struct {
	File   golden.File
	Offset int64
	Length int64
}

// layerPlan is what one layer holds; its id hashes everything its bytes
// depend on, so a layer can be recognised without compressing it again.
type layerPlan struct {
	Pieces []piece
	Bytes  int64
}

func (l *layerPlan) id() string {
	h := sha256.New()
	fmt.Fprintf(h, "dbfork-layer-v1 zstd-default\n")
	for _, p := range l.Pieces {
		fmt.Fprintf(h, "%q %o %d %s %d %d\n", p.File.Path, fs.FileMode(p.File.Mode).Perm(), p.File.Size, p.File.SHA256, p.Offset, p.Length)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// annotations say what a layer holds, for people reading the manifest.
func (l *layerPlan) annotations() map[string]string {
	if len(l.Pieces) == 1 && l.Pieces[0].Length != l.Pieces[0].File.Size {
		p := l.Pieces[0]
		return map[string]string{AnnoLayerChunk: fmt.Sprintf("%s@%d+%d", p.File.Path, p.Offset, p.Length)}
	}
	return map[string]string{AnnoLayerFiles: fmt.Sprint(len(l.Pieces))}
}

// planLayers splits a golden's regular files into layers (in path order),
// each content once.
func planLayers(files []golden.File, largeFile int64) []*layerPlan {
	if largeFile <= 0 {
		largeFile = DefaultLargeFile
	}
	regular := make([]golden.File, 0, len(files))
	for _, f := range files {
		if fs.FileMode(f.Mode).IsRegular() {
			regular = append(regular, f)
		}
	}
	sort.Slice(regular, func(i, j int) bool { return regular[i].Path < regular[j].Path })
	seen := map[string]bool{}
	unique := regular[:0]
	for _, f := range regular {
		if !duplicate(seen, f) { // copies.go: made by the puller
			unique = append(unique, f)
		}
	}
	regular = unique
	var out []*layerPlan
	var group *layerPlan
	flush := func() {
		if group != nil && len(group.Pieces) > 0 {
			out = append(out, group)
		}
		group = nil
	}
	for _, f := range regular {
		if f.Size >= largeFile {
			for off := int64(0); off < f.Size; off += MaxLayer {
				n := min(MaxLayer, f.Size-off)
				out = append(out, &layerPlan{Pieces: []piece{{File: f, Offset: off, Length: n}}, Bytes: n})
			}
			continue
		}
		if group != nil && (cutBefore(f.Path) || group.Bytes+f.Size > largeFile) {
			flush()
		}
		if group == nil {
			group = &layerPlan{}
		}
		group.Pieces = append(group.Pieces, piece{File: f, Length: f.Size})
		group.Bytes += f.Size
	}
	flush()
	return out
}

func cutBefore(path string) bool {
	h := fnv.New32a()
	h.Write([]byte(path))
	return h.Sum32()%groupEvery == 0
}
