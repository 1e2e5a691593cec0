package golden

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/recipe"
)

// inputsDir holds, inside a build dir, the private copies of the inputs
// the build loads. Only the build's owner can enter it.
const inputsDir = "inputs"

// snapshotInputs copies every SQL and dump input of r into dir, each
// opened once with the rights of the user who asked (caller.AsFS)
// and hashed while it is copied, and returns the steps to load: the same
// steps with these copies as their files. A copy whose bytes differ from
// what the key was computed from fails the build. So what a golden is
// loaded from is exactly what its key says: no path is opened twice, and
// a file changed and changed back while the build runs, or a dir swapped
// for another through a symlink, changes nothing.
//
// Only steps from..to-1 (0-based) are copied and returned: a build runs
// its steps one server run at a time (the step cache), and an
// incremental one only the steps after the cached prefix.
func snapshotInputs(ctx context.Context, r *recipe.Recipe, inputs []Input, dir string, from, to int) ([]engine.Step, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the build's private input dir: %w", err)
	}
	steps := make([]engine.Step, 0, len(r.Steps))
	n := 0
	for si, rs := range r.Steps {
		if si < from || si >= to {
			n += len(rs.Files)
			continue
		}
		st := StepOf(rs)
		if rs.Kind != recipe.StepRun {
			st.Files, st.Shown = make([]string, len(rs.Files)), rs.Files
		}
		for i, f := range rs.Files {
			if n >= len(inputs) {
				return nil, fmt.Errorf("recipe inputs changed while building: nothing published; run again")
			}
			if rs.Kind != recipe.StepRun {
				st.Files[i] = filepath.Join(dir, fmt.Sprintf("%04d%s", n, filepath.Ext(f)))
				if err := copyInput(ctx, r.Rel(f), f, st.Files[i], inputs[n]); err != nil {
					return nil, err
				}
			}
			n++
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// copyInput copies src, opened as the user who asked, to the new file
// dst, and checks that the bytes copied are the ones want describes.
func copyInput(ctx context.Context, shown, src, dst string, want Input) error {
	var in *os.File
	err := caller.AsFS(ctx, func() error {
		f, _, err := engine.OpenInput(src)
		in = f
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%s: %w (since its key was computed)", shown, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	sum, size, err := hashFrom(ctx, in, out, want.Size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", shown, err)
	}
	if sum != want.SHA256 || size != want.Size {
		return fmt.Errorf("%s changed after the build hashed it: nothing published; run again", shown)
	}
	return nil
}
