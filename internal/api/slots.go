package api

import (
	"net"
	"sync"
	"time"
)

// TCP has no peer uid, so a per-user cap is impossible; what tells a
// token holder from a stranger is the token itself. A TCP connection
// therefore starts as a stranger's: it counts against a small budget,
// must show the token within StrangerGrace, and is the first to be hung
// up on when more strangers arrive. Once a request on it carried the
// token it moves to the token holders' budget, which strangers cannot
// touch. So idle or slow strangers cost at most MaxStrangerConns
// goroutines and never hold a slot a token holder needs.
const (
	// MaxTCPConns caps token holders' connections open at once; more
	// wait in the kernel's backlog.
	MaxTCPConns = 64
	// MaxStrangerConns caps connections that have not shown the token;
	// a new one hangs up on the oldest. It is also the burst of new
	// connections token holders can open at once without one of them
	// being hung up on before its first request is read.
	MaxStrangerConns = 32
	// StrangerGrace is how long a new connection has to send a request
	// carrying the token.
	StrangerGrace = 3 * time.Second
)

type slotKey struct{}

// slots is a listener that keeps the two budgets.
type slots struct {
	net.Listener
	maxAuthed, maxStrangers int
	grace                   time.Duration

	mu      sync.Mutex
	room    *sync.Cond // signalled when a token holder's slot frees
	authed  int
	strange []*slotConn // oldest first
	closed  bool
}

func newSlots(l net.Listener, maxAuthed, maxStrangers int, grace time.Duration) *slots {
	s := &slots{Listener: l, maxAuthed: maxAuthed, maxStrangers: maxStrangers, grace: grace}
	s.room = sync.NewCond(&s.mu)
	return s
}

// Accept waits while every token holder's slot is taken (token holders
// are trusted, so the wait is theirs to cause), then takes the
// connection in as a stranger's, hanging up on the oldest stranger if
// their budget is full.
func (l *slots) Accept() (net.Conn, error) {
	l.mu.Lock()
	for l.authed >= l.maxAuthed && !l.closed {
		l.room.Wait()
	}
	l.mu.Unlock()
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &slotConn{Conn: c, l: l}
	var evicted *slotConn
	l.mu.Lock()
	if len(l.strange) >= l.maxStrangers {
		evicted = l.strange[0]
		l.drop(evicted)
	}
	l.strange = append(l.strange, sc)
	sc.timer = time.AfterFunc(l.grace, func() { l.expire(sc) })
	l.mu.Unlock()
	if evicted != nil {
		evicted.hangUp()
	}
	return sc, nil
}

func (l *slots) Close() error {
	l.mu.Lock()
	l.closed = true
	l.room.Broadcast()
	l.mu.Unlock()
	return l.Listener.Close()
}

// drop takes c out of whichever budget it is in; l.mu is held.
func (l *slots) drop(c *slotConn) {
	switch c.state {
	case stranger:
		for i, o := range l.strange {
			if o == c {
				l.strange = append(l.strange[:i], l.strange[i+1:]...)
				break
			}
		}
	case holder:
		l.authed--
		l.room.Signal()
	}
	c.state = gone
}

// expire hangs up on c if it has not shown the token by now.
func (l *slots) expire(c *slotConn) {
	l.mu.Lock()
	late := c.state == stranger
	if late {
		l.drop(c)
	}
	l.mu.Unlock()
	if late {
		c.hangUp()
	}
}

const (
	stranger = iota
	holder
	gone
)

type slotConn struct {
	net.Conn
	l     *slots
	timer *time.Timer
	state int // guarded by l.mu
}

// promote moves c to the token holders' budget: a request on it carried
// the token. It may take the budget a few over its cap (the strangers
// accepted before it filled); Accept waits until it is back under.
func (c *slotConn) promote() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.state != stranger {
		return
	}
	c.l.drop(c)
	c.state = holder
	c.l.authed++
	c.timer.Stop()
}

func (c *slotConn) hangUp() {
	c.timer.Stop()
	_ = c.Conn.Close()
}

func (c *slotConn) Close() error {
	c.l.mu.Lock()
	c.l.drop(c)
	c.l.mu.Unlock()
	c.timer.Stop()
	return c.Conn.Close()
}
