package oci

import (
	"errors"
	"fmt"
	"io/fs"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/golden"
	"github.com/dbfork/dbfork/internal/store"
)

// What a pulled or imported golden may cost before anything is written.
const (
	// DefaultMaxBytes caps the sum of the file sizes a golden declares
	// (UnpackOptions.MaxBytes overrides it).
	DefaultMaxBytes = int64(256) << 30
	// inflateRatio and inflateFloor bound the data (bytes outside zero
	// blocks) a layer decompresses to: at most inflateRatio times the
	// compressed bytes read so far, plus inflateFloor. Zero blocks are
	// bounded by the declared sizes and holeSlack instead.
	inflateRatio = 1000
	inflateFloor = 256 << 20
)

// checkSizes refuses a golden whose files add up to more than the cap or
// the store's free space, before any of it is downloaded.
func checkSizes(s *store.Store, m *golden.Manifest, max int64) error {
	if max <= 0 {
		max = DefaultMaxBytes
	}
	files, err := m.Files()
	if err != nil {
		return errs.Invalid("golden %s: bad manifest: %v", golden.Short(m.Key), err)
	}
	var total int64
	for _, f := range files {
		if fs.FileMode(f.Mode).IsRegular() {
			total += f.Size
			if total < 0 || total > max {
				return errs.Invalid("golden %s declares more than the pull limit of %s of files; refused (raise the limit with --max-size if it is real)", golden.Short(m.Key), mib(max))
			}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.GoldensDir(), &st); err != nil {
		return fmt.Errorf("free space of %s: %w", s.GoldensDir(), err)
	}
	if free := int64(st.Bavail) * st.Bsize; total > free {
		return errs.Invalid("golden %s declares %s of files but the store has %s free; refused (free space, or use another store)", golden.Short(m.Key), mib(total), mib(free))
	}
	return nil
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }

// inflated counts n more bytes of data (not zero blocks: those stay
// holes and cost no space) written from the writer's layer, and fails
// once they outgrow the compressed bytes read so far by more than
// inflateRatio.
func (w *entryWriter) inflated(n int64) error {
	if w.in == nil {
		return nil
	}
	w.data += n
	if in := w.in.read(); w.data > in*inflateRatio+inflateFloor {
		return errs.Invalid("layer %s inflates to more than %d times its compressed size (%d bytes of data from %d); refused", w.layer, inflateRatio, w.data, in)
	}
	return nil
}

// covered refuses a file whose layer entries do not carry every byte of
// it: the rest would be holes that cost only the time to read them back.
func (s *fileSums) covered(want map[string]golden.File) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, f := range want {
		var n int64
		for _, c := range s.claims[p] {
			n += c[1]
		}
		if n != f.Size {
			return errs.Invalid("the layers carry %d of the %d bytes of %q: the rest would be holes exceeding its data; refused", n, f.Size, p)
		}
	}
	return nil
}

// checkArtifact asks the golden's engine whether its config makes a
// server run commands or load code; such a golden is refused.
func checkArtifact(dir int, eng engine.Engine, m *golden.Manifest) error {
	ac, ok := eng.(engine.ArtifactChecker)
	if !ok {
		return nil
	}
	// Every entry, not only regular files: a server also reads a config
	// through a symlink, and takes a signal "file" that is a directory.
	// Reading either fails (no symlinks are followed), which refuses it.
	list, err := m.Files()
	if err != nil {
		return errs.Invalid("golden %s: bad manifest: %v", golden.Short(m.Key), err)
	}
	files := make([]string, 0, len(list))
	for _, f := range list {
		files = append(files, f.Path)
	}
	read := func(rel string) ([]byte, error) {
		b, err := readBeneath(dir, rel)
		if err != nil && !errors.Is(err, errs.ErrInvalid) {
			return nil, errs.Invalid("the golden's %s cannot be read as a plain file (%w); refused", rel, err)
		}
		return b, err
	}
	if err := ac.CheckArtifact(files, read); err != nil {
		return fmt.Errorf("golden %s: %w", golden.Short(m.Key), err)
	}
	return nil
}
