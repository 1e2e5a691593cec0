package backend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/reexec"
)

// usernsExecArg is the hidden first argument that makes any binary built
// with this package the helper that mounts a rootless clone in its fresh
// namespaces and then becomes the server:
//
//	BINARY __dbfork-userns-exec MODE LOWER UPPER WORK TARGET -- SERVER ARGV...
//
// It is a helper main of the reexec registry, run by main and TestMain
// (reexec.Main): dbfork re-executes /proc/self/exe, which is a test
// binary when tests start servers.
const usernsExecArg = "__dbfork-userns-exec"

// NamespacePIDFile is the file, in a namespaced clone's scratch dir, that
// holds its server's PID.
const NamespacePIDFile = "server.pid"

const (
	modeExec  = "exec"  // mount, drop capabilities, exec the server
	modeProbe = "probe" // mount, write through the mount, exit
)

func init() {
	reexec.Register(usernsExecArg, func(args []string) int {
		if err := usernsExec(args); err != nil {
			fmt.Fprintf(os.Stderr, "dbfork: rootless overlay: %v\n", err)
			return 125
		}
		return 0
	})
}

func usernsExec(args []string) error {
	if len(args) < 6 || args[5] != "--" {
		return errors.New("usage: " + usernsExecArg + " MODE LOWER UPPER WORK TARGET -- ARGV")
	}
	mode, lower, upper, work, target, argv := args[0], args[1], args[2], args[3], args[4], args[6:]
	// Mounts made here must never propagate back to the parent namespace
	// (a namespace owned by an unprivileged user makes them slaves anyway).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lower, upper, work)
	if err := mountOverlay(target, opts, work); err != nil {
		return fmt.Errorf("mount overlay at %s: %w (OverlayFS in a user namespace needs Linux 5.11 or later, and the store on a local filesystem with user xattrs such as ext4, XFS or btrfs)", target, err)
	}
	if mode == modeProbe {
		f := filepath.Join(target, "f")
		if err := os.WriteFile(f, []byte("y"), 0o600); err != nil {
			return fmt.Errorf("write through the overlay: %w", err)
		}
		if data, err := os.ReadFile(f); err != nil || string(data) != "y" {
			return fmt.Errorf("read back through the overlay: %q %v", data, err)
		}
		return nil
	}
	if len(argv) == 0 {
		return errors.New("no server to run")
	}
	// The server's own pid file is inside the clone, which only this
	// namespace sees: leave one outside, beside the upper dir, for a gc
	// after a crash that came before dbfork recorded the server.
	pidFile := filepath.Join(filepath.Dir(upper), NamespacePIDFile)
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d\n", os.Getpid())), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", pidFile, err)
	}
	// The server runs with no capabilities at all: the ambient set goes,
	// and exec as a non-zero uid then clears the rest.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	err := syscall.Exec(argv[0], argv, os.Environ())
	return fmt.Errorf("exec %s: %w", argv[0], err)
}
