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

func (Copy) Describe() string {
	return "a full byte copy of the golden per clone: slow and big, the last resort (`dbfork doctor` says how to get copy-on-write)"
}

// Caps: a copy has just been written, so its pages are cached.
func (Copy) Caps() Caps { return Caps{FullCopy: true} }

func (Copy) Probe(ctx context.Context, dir string) error {
	p, done, err := probeDir(dir, "copy")
	if err != nil {
		return err
	}
	defer done()
	return os.WriteFile(filepath.Join(p, "f"), []byte("x"), 0o600)
}

func (Copy) Prepare(ctx context.Context, golden, clone, scratch string) error {
	return copyTree(golden, clone, byteCopy, true)
}

func (Copy) Remove(ctx context.Context, clone, scratch string) error {
	return RemoveDataDir(clone)
}
