package engine

import (
	"context"
	"fmt"
	"github.com/dbfork/dbfork/internal/errs"
	"net"
	"os"
	"strings"
	"time"
)

// FreePort asks the kernel for a free loopback port. Another process can
// take it before the server binds it, so Start retries on a collision.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startTries is how often a server is started on a new port after the
// one picked for it was taken between probe and bind.
const startTries = 5

// fixedPortPause is the first pause before a fixed port is tried again;
// it doubles each time (50 ms to 400 ms, 750 ms in all).
var fixedPortPause = 50 * time.Millisecond

// StartOnFreePort is the port half of every engine's Start: it runs start
// on spec.Port or, when that is 0, on a free loopback port (spec.TryPorts
// first), and again on another port while the server log (spec.LogFile)
// says, in one of takenSays, that the port was taken meanwhile. A port
// the caller fixed (a reset keeps its DSN) is tried again, after a
// pause, while the log says so: what holds it between the old server's
// stop and the new one's bind is most often short-lived (another
// process's outgoing connection, given that port by the kernel, or a
// probe of FreePort). A MariaDB reset in CI met that once.
func StartOnFreePort(spec StartSpec, takenSays []string, start func(port int) (*Server, error)) (*Server, error) {
	if err := CheckSocketDir(spec.SocketDir); err != nil {
		return nil, err
	}
	tryPorts := spec.TryPorts
	var lastErr error
	for attempt := 0; attempt < startTries; attempt++ {
		port := spec.Port
		if port == 0 && len(tryPorts) > 0 {
			port, tryPorts = tryPorts[0], tryPorts[1:]
		} else if port == 0 {
			var err error
			if port, err = FreePort(); err != nil {
				return nil, err
			}
		}
		srv, err := start(port)
		if err == nil || !logSays(spec.LogFile, takenSays) {
			return srv, err
		}
		lastErr = err // someone took the port between probe and bind
		if spec.Port != 0 && attempt < startTries-1 {
			time.Sleep(fixedPortPause << attempt)
		}
	}
	return nil, lastErr
}

func logSays(logFile string, phrases []string) bool {
	data, _ := os.ReadFile(logFile)
	for _, p := range phrases {
		if strings.Contains(string(data), p) {
			return true
		}
	}
	return false
}

// WaitReady is the readiness half of every engine's Start: it calls try
// (a real query through a real connection, which it returns) until it
// succeeds, the server exits, or timeout passes; failures carry the
// server log's tail. Polls start 1 ms apart and stay at most 10 ms apart:
// a server is ready in 40-60 ms, and a coarser poll only adds to it.
func WaitReady[C any](ctx context.Context, srv *Server, timeout time.Duration, try func(ctx context.Context) (C, error)) (C, error) {
	var none C
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := time.Millisecond
	var lastErr error
	for {
		if srv.Exited() {
			return none, fmt.Errorf("%s exited during start; server log %s ends with:\n%s", srv.Engine, srv.LogFile, LogTail(srv.LogFile, 20))
		}
		c, err := try(ctx)
		if err == nil {
			return c, nil
		}
		lastErr = err
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return none, fmt.Errorf("%s not ready after %s (%v); server log %s ends with:\n%s", srv.Engine, timeout, lastErr, srv.LogFile, LogTail(srv.LogFile, 20))
		case <-t.C:
		}
		if delay < 10*time.Millisecond {
			delay = delay * 3 / 2
		}
	}
}

// MaxSocketDir is the longest socket dir every engine's socket fits
// below: a unix socket's path holds 107 bytes, and the longest socket
// name is PostgreSQL's "/.s.PGSQL.NNNNN" (16 bytes).
const MaxSocketDir = 107 - 16

// CheckSocketDir refuses a socket dir too long for a unix socket, with
// what to do about it, rather than a server that fails to start with
// "could not create any Unix-domain sockets".
func CheckSocketDir(dir string) error {
	if len(dir) > MaxSocketDir {
		return errs.Invalid("socket dir %s is %d bytes long, but a unix socket path holds 107: use a store at a shorter path (--store or DBFORK_STORE; at most about %d bytes)", dir, len(dir), MaxSocketDir-40)
	}
	return nil
}
