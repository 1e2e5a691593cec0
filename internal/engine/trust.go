package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// TrustedBinaries checks, when dbfork runs as root, that the binaries it
// would run from dir (and every directory leading to them, links
// resolved) are root's and writable by nobody else: a recipe's bindir
// must not turn `postgres -V` into a program of the recipe author's
// choosing run as root. Without root it checks nothing (the binaries run
// as the user anyway).
func TrustedBinaries(dir string, names []string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, n := range names {
		p, err := filepath.EvalSymlinks(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		for q := p; ; q = filepath.Dir(q) {
			var st syscall.Stat_t
			if err := syscall.Lstat(q, &st); err != nil {
				return err
			}
			if st.Uid != 0 || st.Mode&0o022 != 0 && !(st.Mode&syscall.S_IFMT == syscall.S_IFDIR && st.Mode&syscall.S_ISVTX != 0 && q != filepath.Dir(p)) {
				return fmt.Errorf("%s is not root's alone (uid %d, mode %o): as root, dbfork runs server binaries only from paths that only root can change", q, st.Uid, st.Mode&0o7777)
			}
			if q == "/" {
				break
			}
		}
	}
	return nil
}
