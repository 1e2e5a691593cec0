package engine

import (
	"context"
	"os"
	"os/user"
	"strconv"
	"strings"
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

type callerKey struct{}

// WithCaller makes RunCommand run commands as the user who returns
// (nil: as this process). who is called once, when a command first runs:
// most commands never build, so they never look the user up.
func WithCaller(ctx context.Context, who func() *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, sync.OnceValue(who))
}

func callerFrom(ctx context.Context) *Caller {
	who, _ := ctx.Value(callerKey{}).(func() *Caller)
	if who == nil {
		return nil
	}
	if c := who(); c != nil && c.UID != os.Geteuid() {
		return c
	}
	return nil
}

// LookupCaller describes uid (with gid as its primary group) from the
// password and group databases; a uid without an entry still gets its ids.
func LookupCaller(uid, gid int) *Caller {
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

// SudoCaller is the user who ran this root process through sudo, or nil.
func SudoCaller() *Caller {
	if os.Geteuid() != 0 {
		return nil
	}
	uid, err1 := strconv.Atoi(os.Getenv("SUDO_UID"))
	gid, err2 := strconv.Atoi(os.Getenv("SUDO_GID"))
	if err1 != nil || err2 != nil || uid == 0 {
		return nil
	}
	c := LookupCaller(uid, gid)
	c.OwnEnv = true // sudo's environment is the user's own
	return c
}

// callerEnv adapts a command's environment to another user: their home
// and name, and TCP instead of the server's socket dir (private to the
// server user).
func callerEnv(env []string, c *Caller) []string {
	out := env[:0:0]
	for _, kv := range tcpOnlyKV(env) {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "USER", "LOGNAME", "SUDO_UID", "SUDO_GID", "SUDO_USER", "SUDO_COMMAND", "XDG_RUNTIME_DIR":
			continue
		}
		if !c.OwnEnv && !passedToOthers(k) {
			continue
		}
		out = append(out, kv)
	}
	out = append(out, "HOME="+c.Home)
	if c.Name != "" {
		out = append(out, "USER="+c.Name, "LOGNAME="+c.Name)
	}
	return out
}

// CallerOf is the user ctx acts for, or nil when that is this process.
func CallerOf(ctx context.Context) *Caller { return callerFrom(ctx) }

// passedToOthers says which variables a daemon passes to a socket
// peer's commands: what a shell needs and what reaches the database.
func passedToOthers(k string) bool {
	switch k {
	case "PATH", "LANG", "TZ", "TERM", "DATABASE_URL":
		return true
	}
	for _, p := range append([]string{"LC_", "DBFORK_INSTANCE"}, ClientPrefixes()...) {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
