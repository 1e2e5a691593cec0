package backend

import (
	"context"
	"os"
	"path/filepath"
)

// Copy makes a full byte copy: the honest last resort, never chosen
// silently (auto says so, doctor says how to do better).
type Copy struct{}

func (Copy) Name() string { return "copy" }

// CopiesAll marks Copy as a FullCopier.
func (Copy) CopiesAll() {}

func (Copy) Probe(ctx context.Context, dir string) error {
	p, done, err := probeDir(dir, "copy")
	if err != nil {
		return err
	}
	defer done()
	return os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600)
}

func (Copy) Prepare(ctx context.Context, golden, clone, scratch string) error {
	return copyTree(golden, clone, byteCopy)
}

func (Copy) Remove(ctx context.Context, clone, scratch string) error {
	return RemoveDataDir(clone)
}
