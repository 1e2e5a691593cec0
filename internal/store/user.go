package store

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"

	"github.com/dbfork/dbfork/internal/errs"
)

// ServerUserName is the system user servers run as when dbfork runs as
// root (PostgreSQL refuses to run as root).
const ServerUserName = "dbfork"

// User is the account that runs servers and owns goldens and clones.
type User struct {
	Name   string
	UID    int
	GID    int
	Groups []uint32 // supplementary groups (none for the shared server user)
}

// Dropped reports whether processes must switch to this user (dbfork runs
// as root) rather than run as ourselves.
func (u User) Dropped() bool { return u.UID != os.Geteuid() }

// Credential is the SysProcAttr credential that runs a child as u, or nil
// when no switch is needed.
func (u User) Credential() *syscall.Credential {
	if !u.Dropped() {
		return nil
	}
	groups := append([]uint32{}, u.Groups...)
	return &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groups}
}

// Chown gives path to u (a no-op when we are u).
func (u User) Chown(path string) error {
	if !u.Dropped() {
		return nil
	}
	return os.Lchown(path, u.UID, u.GID)
}

// ServerUser is the current user, or as root the dbfork system user,
// created on first use.
func ServerUser() (User, error) {
	if os.Geteuid() != 0 {
		cu, err := user.Current()
		name := strconv.Itoa(os.Geteuid())
		if err == nil {
			name = cu.Username
		}
		return User{Name: name, UID: os.Geteuid(), GID: os.Getegid()}, nil
	}
	if u, err := lookup(ServerUserName); err == nil {
		return u, nil
	}
	out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
		"--comment", "dbfork database servers", ServerUserName).CombinedOutput()
	if u, lerr := lookup(ServerUserName); lerr == nil {
		return u, nil // created now, or by a concurrent dbfork
	}
	if err != nil {
		return User{}, errs.Unsupported("create system user %s: %v: %s (create it yourself: useradd --system %s)", ServerUserName, err, string(out), ServerUserName)
	}
	return lookup(ServerUserName)
}

func lookup(name string) (User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return User{}, err
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return User{}, fmt.Errorf("user %s has a non-numeric id", name)
	}
	return User{Name: name, UID: uid, GID: gid}, nil
}
