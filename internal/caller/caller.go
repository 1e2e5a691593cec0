// Package caller is about whom dbfork's child processes act for and run
// as: the Caller who asked for a build (a daemon's socket peer, or the
// user behind sudo) and the User account that runs servers. It sits
// below every other dbfork package and imports none of them, so engine,
// golden and daemon can all speak of identity without importing one
// another (or the store).
package caller

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"sync"
)

// Caller is the user a recipe's `run` steps run as: the person who asked
// for the build (the daemon's peer, or the user behind `sudo`), not the
// root process that serves them. Their migration tools then run with
// their own files, home and rights, and a socket owner cannot turn a
// recipe into commands run as root.
type Caller struct {
	UID, GID int
	Groups   []uint32
	Name     string
	Home     string
	// OwnEnv is false when this process's environment is not the
	// caller's (a daemon serving a socket peer): their commands then get
	// only PATH, locale, time zone and the connection variables, never
	// the daemon's own (credentials, tokens).
	OwnEnv bool
}

type key struct{}

// With makes commands and file reads under ctx act as the user who
// returns (nil: as this process). who is called once, when first needed:
// most commands never build, so they never look the user up.
func With(ctx context.Context, who func() *Caller) context.Context {
	return context.WithValue(ctx, key{}, sync.OnceValue(who))
}

// From is the user ctx acts for, or nil when that is this process.
func From(ctx context.Context) *Caller {
	who, _ := ctx.Value(key{}).(func() *Caller)
	if who == nil {
		return nil
	}
	if c := who(); c != nil && c.UID != os.Geteuid() {
		return c
	}
	return nil
}

// UID is the uid of the user ctx acts for, or this process's.
func UID(ctx context.Context) int {
	if c := From(ctx); c != nil {
		return c.UID
	}
	return os.Geteuid()
}

// Lookup describes uid (with gid as its primary group) from the password
// and group databases; a uid without an entry still gets its ids.
func Lookup(uid, gid int) *Caller {
	c := &Caller{UID: uid, GID: gid, Home: "/"}
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return c
	}
	c.Name, c.Home = u.Username, u.HomeDir
	if gids, err := u.GroupIds(); err == nil {
		for _, g := range gids {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil {
				c.Groups = append(c.Groups, uint32(n))
			}
		}
	}
	return c
}

// Sudo is the user who ran this root process through sudo, given the
// values of SUDO_UID and SUDO_GID (read at the edge), or nil.
func Sudo(sudoUID, sudoGID string) *Caller {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, err1 := strconv.Atoi(sudoUID)
	gid, err2 := strconv.Atoi(sudoGID)
	if err1 != nil || err2 != nil || uid == 0 {
		return nil
	}
	c := Lookup(uid, gid)
	c.OwnEnv = true // sudo's environment is the user's own
	return c
}
