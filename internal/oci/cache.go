package oci

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// layerCache remembers the blob each layer plan compressed to, so a push
// of a golden whose layers a registry already holds compresses nothing.
// It is only a hint: a wrong entry makes the registry lack the blob, and
// the layer is then made again.
type layerCache struct {
	path    string
	mu      sync.Mutex
	entries map[string]cachedLayer
	dirty   bool
}

type cachedLayer struct {
	Digest digest.Digest `json:"digest"`
	Size   int64         `json:"size"`
}

func openLayerCache(s *store.Store) *layerCache {
	c := &layerCache{path: filepath.Join(s.CacheDir(), "oci-layers.json"), entries: map[string]cachedLayer{}}
	if data, err := os.ReadFile(c.path); err == nil {
		_ = json.Unmarshal(data, &c.entries)
	}
	return c
}

func (c *layerCache) get(id string) (ocispec.Descriptor, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || e.Digest.Validate() != nil {
		return ocispec.Descriptor{}, false
	}
	return ocispec.Descriptor{MediaType: LayerType, Digest: e.Digest, Size: e.Size}, true
}

func (c *layerCache) put(id string, d ocispec.Descriptor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[id] = cachedLayer{Digest: d.Digest, Size: d.Size}
	c.dirty = true
}

func (c *layerCache) save() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return
	}
	if data, err := json.Marshal(c.entries); err == nil {
		_ = fsutil.WriteFileAtomic(c.path, data, 0o600)
	}
}
