package cli

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/errs"
)

// Who a daemon serves on its unix socket. By default: its own uid and
// root. A root daemon therefore serves root only: serving another user
// means building their recipes and running their seeds' commands as them
// from a root process, and a user is better served by a store of their
// own, which needs no root after it is set up. --allow-users serves every
// uid that can connect (the socket's mode decides who can).

// peerGate lets through the connections of peers the daemon serves and
// answers every request on the others with one 403 line.
type peerGate struct {
	net.Listener
	allowAll bool
	refuser  *http.Server
	refused  *chanListener
}

func gate(l net.Listener, allowAll bool) *peerGate {
	g := &peerGate{Listener: l, allowAll: allowAll, refused: newChanListener(l.Addr())}
	g.refuser = &http.Server{
		Handler:           http.HandlerFunc(refuse),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, refusedUIDKey{}, peerUID(c))
		},
	}
	go func() { _ = g.refuser.Serve(g.refused) }()
	return g
}

// served says whether a peer of uid gets the API.
func (g *peerGate) served(uid int) bool {
	return g.allowAll || uid == 0 || (uid >= 0 && uid == os.Geteuid())
}

func (g *peerGate) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if g.served(peerUID(c)) {
			return c, nil
		}
		if !g.refused.give(c) {
			c.Close()
		}
	}
}

func (g *peerGate) Close() error {
	err := g.Listener.Close()
	_ = g.refuser.Close()
	return err
}

// peerUID is the uid at the other end of a unix connection, -1 when the
// kernel does not say.
func peerUID(c net.Conn) int {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return -1
	}
	uid := -1
	if raw, err := uc.SyscallConn(); err == nil {
		_ = raw.Control(func(fd uintptr) {
			if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
				uid = int(cred.Uid)
			}
		})
	}
	return uid
}

// refuse answers a peer the daemon does not serve, naming what to use
// instead: a store of their own.
func refuse(w http.ResponseWriter, r *http.Request) {
	who := "NAME"
	if uid, ok := r.Context().Value(refusedUIDKey{}).(int); ok {
		who = strconv.Itoa(uid)
		if u, err := user.LookupId(who); err == nil {
			who = u.Username
		}
	}
	err := errs.Forbidden("this dbfork daemon runs as root and serves root only: use a store of your own (set up once with `sudo dbfork store init --user %s`), or a daemon started with `dbfork serve --allow-users`", who)
	status, kind := errs.HTTP(err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: err.Error(), Kind: kind})
}

type refusedUIDKey struct{}

// chanListener hands connections given to it to an http.Server.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *chanListener) give(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
