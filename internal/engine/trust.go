package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// BasePath is the PATH of the programs dbfork runs for itself.
const BasePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// TrustedBinaries checks, when dbfork runs as root, that the binaries it
// would run from dir (and every directory leading to them, links
// resolved) are root's and writable by nobody else: a recipe's bindir
// must not turn `postgres -V` into a program of the recipe author's
// choosing. Without root it checks nothing (the binaries run as the user
// anyway).
func TrustedBinaries(dir string, names []string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, n := range names {
		p, err := filepath.EvalSymlinks(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		if err := rootsAlone(p, true); err != nil {
			return err
		}
	}
	return nil
}

// TrustedDir checks that dir and every dir above it are root's and
// writable by nobody else, whoever runs dbfork: both the path as given
// (a link on the way must be root's too: one in /tmp could point
// anywhere) and the path it resolves to.
func TrustedDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for q := abs; ; q = filepath.Dir(q) {
		var st syscall.Stat_t
		if err := syscall.Lstat(q, &st); err != nil {
			return err
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFLNK && st.Uid != 0 {
			return fmt.Errorf("%s is a link of uid %d: only root's links are followed here", q, st.Uid)
		}
		if q == "/" {
			break
		}
	}
	p, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return err
	}
	return rootsAlone(p, false)
}

// rootsAlone walks from p up to /; a sticky dir (/tmp) may lie on the way
// but not hold p itself.
func rootsAlone(p string, isFile bool) error {
	for q := p; ; q = filepath.Dir(q) {
		var st syscall.Stat_t
		if err := syscall.Lstat(q, &st); err != nil {
			return err
		}
		holder := q == p || isFile && q == filepath.Dir(p)
		sticky := st.Mode&syscall.S_IFMT == syscall.S_IFDIR && st.Mode&syscall.S_ISVTX != 0
		if st.Uid != 0 || st.Mode&0o022 != 0 && (!sticky || holder) {
			return fmt.Errorf("%s is not root's alone (uid %d, mode %o): as root, dbfork runs server binaries only from paths that only root can change", q, st.Uid, st.Mode&0o7777)
		}
		if q == "/" {
			return nil
		}
	}
}

// probeUID runs version probes (`postgres -V`, `psql --version`,
// `mariadbd --version`) when dbfork is root. A probe runs a binary that
// passed TrustedBinaries for a moment, and root reads one line of what it
// prints: nothing it does, or any library it loads, needs root, and
// nobody owns nothing (a dynamic uid would cost a claim on every engine
// open; a process of nobody's can at worst make the probe lie about a
// version, never act as root).
const probeUID = 65534

// ProbeCommand is a version probe: path args, run from / with dbfork's
// base environment, as nobody when dbfork is root.
func ProbeCommand(ctx context.Context, path string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = "/"
	cmd.Env = BaseEnv()
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: probeUID, Gid: probeUID, Groups: []uint32{}}}
	}
	return cmd
}
