package caller

import (
	"os"
	"syscall"
)

// User is the account that runs servers and owns goldens and clones: the
// store's server user, or a uid claimed for one instance or build. The
// store finds or creates it (store.ServerUser); engines only run
// processes as it, so the type lives here, below both.
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
