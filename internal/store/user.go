package store

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"

	"github.com/dbfork/dbfork/internal/caller"
	"github.com/dbfork/dbfork/internal/errs"
)

// ServerUserName is the system user servers run as when dbfork runs as
// root (PostgreSQL refuses to run as root).
const ServerUserName = "dbfork"

// User is the account that runs servers and owns goldens and clones. The
// type lives in package caller, below engine, so engines run processes as
// it without importing the store.
type User = caller.User

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
		return User{}, errs.Unsupported("create system user %s: %w: %s (create it yourself: useradd --system %s)", ServerUserName, err, string(out), ServerUserName)
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
