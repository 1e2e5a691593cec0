package fetch

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// sums are an archive's checksums; local is where mvn keeps it (the
// caller's own local repository), if anywhere.
type sums struct {
	sha1, sha256 string
	local        string
}

// copyHashed hashes src and, when dst is set, copies it there (a new file
// of ours): what is unpacked later is exactly what was hashed.
func copyHashed(src *os.File, dst string) (sums, error) {
	h1, h256 := sha1.New(), sha256.New()
	w := io.MultiWriter(h1, h256)
	var out *os.File
	if dst != "" {
		var err error
		out, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return sums{}, err
		}
		defer out.Close()
		w = io.MultiWriter(h1, h256, out)
	}
	if _, err := io.Copy(w, src); err != nil {
		return sums{}, fmt.Errorf("read %s: %w", src.Name(), err)
	}
	if out != nil {
		if err := out.Sync(); err != nil {
			return sums{}, err
		}
	}
	return sums{sha1: hex.EncodeToString(h1.Sum(nil)), sha256: hex.EncodeToString(h256.Sum(nil))}, nil
}

// readBeneath reads dir/rel (see openBeneath), at most limit bytes.
func readBeneath(dir, rel string, limit int64) ([]byte, error) {
	f, err := openBeneath(dir, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}

// listBeneath lists the dir dir/rel with no symlink on the way.
func listBeneath(dir, rel string) ([]string, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, rel))
	defer f.Close()
	return f.Readdirnames(-1)
}

// othersCanRead reports whether a user with no rights of root's could
// read path (every dir on the way searchable, the file readable).
func othersCanRead(path string) bool { return othersCan(path, 0o004) }

// othersCanRun is othersCanRead for running a program.
func othersCanRun(path string) bool { return othersCan(path, 0o005) }

func othersCan(path string, bits os.FileMode) bool {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false
	}
	fi, err := os.Stat(p)
	if err != nil || fi.IsDir() || fi.Mode().Perm()&bits != bits {
		return false
	}
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		di, err := os.Stat(d)
		if err != nil || di.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" {
			return true
		}
	}
}
