package fetch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/store"
)

// A worker is who touches what a registry sent: mvn and pip, the
// unpacker and the first run of a fetched binary. As root it is a
// dynamic uid of its own (claimed like an instance's, with no group: it
// reaches nothing of any store), working in a private dir that no one
// else can enter, under a fetch dir that root alone owns; root takes the
// dir back, ends every process of the uid and gives the uid up before it
// reads a byte of the result. Without root the worker is the user, still
// in a private dir.
//
// The private dir is HOME, the working dir and Maven's project base dir:
// Maven looks for .mvn/ (jvm.config, maven.config, extensions.xml) in its
// working dir and every parent, and this dir and its parents are root's
// alone (see checkFetchDir).
type worker struct {
	uid  int    // the claimed uid; -1: ourselves
	fd   string // the fetch dir (root's), parent of dir
	name string
	dir  string
	done bool
}

// newWorker makes fetchDir/name and, as root, claims a uid for it.
func newWorker(fetchDir, name string) (*worker, error) {
	w := &worker{uid: -1, fd: fetchDir, name: name, dir: filepath.Join(fetchDir, name)}
	if err := os.Mkdir(w.dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return w, nil
	}
	uid, err := store.ClaimUID(w.dir)
	if err != nil {
		return nil, err
	}
	w.uid = uid
	if err := os.Lchown(w.dir, uid, uid); err != nil {
		_ = w.end(context.Background())
		return nil, err
	}
	return w, nil
}

// dropped reports whether the worker is another uid than ours.
func (w *worker) dropped() bool { return w.uid >= 0 }

// attr runs a child as the worker, in a session of its own, killed when
// dbfork dies.
func (w *worker) attr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if w.dropped() {
		a.Credential = &syscall.Credential{Uid: uint32(w.uid), Gid: uint32(w.uid), Groups: []uint32{}}
	}
	return a
}

// command is argv run as the worker in its dir with env.
func (w *worker) command(ctx context.Context, env []string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = w.dir
	cmd.Env = env
	cmd.SysProcAttr = w.attr()
	return cmd
}

// proxyVars are the only variables a root fetch keeps from its
// environment: how this machine reaches the network. A proxy cannot
// forge a pinned archive.
var proxyVars = []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "all_proxy", "ALL_PROXY"}

// env is the environment of the worker's tools. As root it is made from
// nothing: under `sudo -E` the caller's MAVEN_OPTS, MAVEN_ARGS,
// JAVA_TOOL_OPTIONS, PIP_* or JAVA_HOME would decide what runs. Without
// root the user's own environment is theirs to use.
func (w *worker) env(extra ...string) []string {
	if !w.dropped() {
		return append(os.Environ(), extra...)
	}
	env := []string{"PATH=" + trustedPath(), "HOME=" + w.dir, "TMPDIR=" + w.dir, "LANG=C.UTF-8"}
	for _, k := range proxyVars {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// trustedPath is the standard PATH cut to the dirs only root can change.
func trustedPath() string {
	var keep []string
	for _, d := range filepath.SplitList(engine.BasePath) {
		if engine.TrustedDir(d) == nil {
			keep = append(keep, d)
		}
	}
	return strings.Join(keep, ":")
}

// end takes the worker's dir back (root's, 0700: no process of the uid
// can enter it again, whatever it left behind) and then ends every
// process of the uid and gives the uid up. Nothing the worker made is
// read before this.
func (w *worker) end(ctx context.Context) error {
	if !w.dropped() || w.done {
		return nil
	}
	w.done = true
	err := takeDir(w.fd, w.name)
	if rerr := store.ReleaseUser(ctx, w.uid, w.dir); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return err
}

// takeDir makes parent/name root's and 0700 without following links.
func takeDir(parent, name string) error {
	pfd, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", parent, err)
	}
	defer unix.Close(pfd)
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", filepath.Join(parent, name), err)
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, 0, 0); err != nil {
		return err
	}
	return unix.Fchmod(fd, 0o700)
}

// openBeneath opens dir/rel for reading with no symlink anywhere on the
// way and no way out of dir: the worker made every name under dir.
func openBeneath(dir, rel string) (*os.File, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, rel), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, rel))
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", filepath.Join(dir, rel))
	}
	return f, nil
}

// rootHome is root's home from the password database: under `sudo -E`,
// $HOME is the caller's, whose ~/.m2 and pip config must not decide what
// root installs.
func rootHome() string {
	if u, err := user.LookupId("0"); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return "/root"
}

// giveFile copies a config file of root's to dst (in the worker's dir,
// before the worker runs) so the worker can read it: root's home is
// usually closed to others. A missing src is no error.
func (w *worker) giveFile(src, dst string) (bool, error) {
	data, err := os.ReadFile(src)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return false, err
	}
	for d := filepath.Dir(dst); d != w.dir && strings.HasPrefix(d, w.dir+"/"); d = filepath.Dir(d) {
		if w.dropped() {
			if err := os.Lchown(d, w.uid, w.uid); err != nil {
				return false, err
			}
		}
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return false, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return false, err
	}
	return true, f.Close()
}
