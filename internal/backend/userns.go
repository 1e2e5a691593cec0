package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// UsernsOverlay is OverlayFS for users without root: the clone is mounted
// inside new user + mount namespaces that the server itself runs in
// (Linux >= 5.11, mount option userxattr). Only the caller's own uid and
// gid are mapped, to themselves: no newuidmap is needed, and the server
// runs as the user (PostgreSQL refuses uid 0). The mount lives and dies
// with the server's namespace, so a crash leaks no mount.
//
// Prepare only lays out the mount point and the upper and work dirs; the
// server is started through Wrap (a re-exec of this binary that mounts,
// then execs the server). Outside the namespace the clone dir is empty:
// readers go through the server's /proc/PID/root (engine.Server.Outside).
type UsernsOverlay struct{}

// Namespaced is implemented by backends whose clone exists only inside
// the server's own mount namespace: Prepare lays out directories, and
// Wrap (for engine.StartSpec.Wrap) mounts the clone as the server starts.
type Namespaced interface {
	Wrap(golden, clone, scratch string) func(argv []string, attr *syscall.SysProcAttr) []string
}

func (UsernsOverlay) Name() string { return "userns-overlay" }

func (UsernsOverlay) Describe() string {
	return "OverlayFS without root, mounted in the server's own user namespace: one mount per clone, but a file is copied whole on its first read-write open"
}

// Caps: as for Overlay.
func (UsernsOverlay) Caps() Caps { return Caps{CopiesUp: true} }

func (u UsernsOverlay) Probe(ctx context.Context, dir string) error {
	if os.Geteuid() == 0 {
		return errors.New("for users without root; as root, overlay mounts directly")
	}
	p, done, err := probeDir(dir, "userns")
	if err != nil {
		return err
	}
	defer done()
	lower, err := probeLower(p)
	if err != nil {
		return err
	}
	clone, scratch := filepath.Join(p, "merged"), filepath.Join(p, "scratch")
	if err := u.Prepare(ctx, lower, clone, scratch); err != nil {
		return err
	}
	var out bytes.Buffer
	attr := &syscall.SysProcAttr{}
	argv := u.wrap(lower, clone, scratch, modeProbe)(nil, attr)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr, cmd.Stdout, cmd.Stderr = attr, &out, &out
	err = cmd.Run()
	if err == nil {
		if data, rerr := os.ReadFile(filepath.Join(lower, "f")); rerr != nil || string(data) != "x" {
			return fmt.Errorf("a write through the rootless overlay reached its lower dir (%v)", rerr)
		}
		return nil
	}
	if why := UsernsBlocked(SysctlDir); why != "" {
		return errors.New(why)
	}
	if msg := strings.TrimSpace(out.String()); msg != "" {
		return fmt.Errorf("%s", strings.TrimPrefix(msg, "dbfork: "))
	}
	return fmt.Errorf("create a user namespace: %w (Linux 5.11 or later with user namespaces allowed is needed)", err)
}

// Prepare lays out the clone's mount point and the overlay's upper and
// work dirs; the mount itself happens in the server's namespace (Wrap).
func (UsernsOverlay) Prepare(ctx context.Context, golden, clone, scratch string) error {
	for _, p := range []string{golden, clone, scratch} {
		if strings.ContainsAny(p, ",:\\") {
			return fmt.Errorf("path %q has a comma, colon or backslash, which OverlayFS options cannot hold; use another store path", p)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(golden, &st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("golden %s belongs to uid %d, not to you (uid %d): a rootless clone can only be made of your own goldens; build it in your own store", golden, st.Uid, os.Geteuid())
	}
	if _, err := os.Lstat(clone); err == nil {
		return fmt.Errorf("clone %s already exists", clone)
	}
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{scratch, upper, work, clone} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	return os.Chmod(upper, os.FileMode(st.Mode&0o7777))
}

// Remove: nothing is mounted in this namespace (the mount went with the
// server's), so the dirs go; a mount someone else made below is refused.
func (UsernsOverlay) Remove(ctx context.Context, clone, scratch string) error {
	return Overlay{}.Remove(ctx, clone, scratch)
}

// OwnedDir: the upper dir, readable from outside the namespace.
func (UsernsOverlay) OwnedDir(clone, scratch string) string { return filepath.Join(scratch, "upper") }

// CheapCopyUp: as for Overlay, copy-up is by reflink on XFS and btrfs.
func (UsernsOverlay) CheapCopyUp(scratch string) bool { return Overlay{}.CheapCopyUp(scratch) }

// Wrap returns the StartSpec.Wrap that starts a server on this clone.
func (u UsernsOverlay) Wrap(golden, clone, scratch string) func([]string, *syscall.SysProcAttr) []string {
	return u.wrap(golden, clone, scratch, modeExec)
}

// nsCaps are the capabilities the helper keeps across its exec, inside
// the new user namespace only: OverlayFS does every later copy-up with
// the mounter's credentials, and its work dir is mode 000, so the mounter
// needs to override file permissions, not just mount. The helper drops
// them all before it execs the server.
var nsCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH,
	unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_CHOWN, unix.CAP_MKNOD}

func (UsernsOverlay) wrap(golden, clone, scratch, mode string) func([]string, *syscall.SysProcAttr) []string {
	return func(argv []string, attr *syscall.SysProcAttr) []string {
		uid, gid := os.Getuid(), os.Getgid()
		attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = nsCaps
		attr.Credential = nil // the caller's own ids, mapped to themselves
		head := []string{"/proc/self/exe", usernsExecArg, mode, golden,
			filepath.Join(scratch, "upper"), filepath.Join(scratch, "work"), clone, "--"}
		return append(head, argv...)
	}
}

// SysctlDir is where UsernsBlocked reads kernel settings.
const SysctlDir = "/proc/sys"

// UsernsBlocked says, in one line with the fix, why unprivileged user
// namespaces are not available, from the sysctls under dir ("" when none
// of them forbids it).
func UsernsBlocked(dir string) string {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("user/max_user_namespaces") == "0":
		return "user namespaces are disabled (user.max_user_namespaces = 0); allow them: sudo sysctl -w user.max_user_namespaces=15000"
	case read("kernel/unprivileged_userns_clone") == "0":
		return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0); allow them: sudo sysctl -w kernel.unprivileged_userns_clone=1"
	case read("kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1); give the dbfork binary an AppArmor profile with `userns,` or run: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	}
	return ""
}
