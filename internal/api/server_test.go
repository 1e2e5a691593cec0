package api

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// stub answers every call; these tests are about the HTTP layer (decoding,
// tokens, connections), not about what a daemon does.
type stub struct{ acquired int }

func (s *stub) Health() Health { return Health{Status: "ok"} }
func (s *stub) EnsureGolden(context.Context, GoldenRequest, Peer) (*Golden, error) {
	return &Golden{}, nil
}
func (s *stub) Acquire(context.Context, AcquireRequest, Peer) (*Lease, error) {
	s.acquired++
	return &Lease{ID: "0badf00d"}, nil
}
func (s *stub) Release(string, Peer) error        { return nil }
func (s *stub) Keep(string, Peer) (*Lease, error) { return &Lease{}, nil }
func (s *stub) Leases(Peer) []Lease               { return nil }
func (s *stub) Pools(Peer) []PoolInfo             { return nil }
func (s *stub) Reset(context.Context, string, Peer) (*Lease, error) {
	return &Lease{}, nil
}
func (s *stub) CreateDatabase(context.Context, string, Peer) (*Database, error) {
	return &Database{}, nil
}
func (s *stub) DropDatabase(context.Context, string, string, Peer) error { return nil }
func (s *stub) Fresh(context.Context, string, Peer) (*FreshDB, error) {
	return &FreshDB{Mode: ModeNone}, nil
}
func (s *stub) DownKept(context.Context, string, Peer) error { return nil }
func (s *stub) ResetKept(context.Context, string, Peer) (*Lease, error) {
	return &Lease{}, nil
}

func serveTCP(t *testing.T, svc Service) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(svc, "secret", nil)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

// A request body must be exactly one object with known, exactly spelled,
// unrepeated keys and numbers within the caps (issue 12 L3).
func TestStrictRequests(t *testing.T) {
	svc := &stub{}
	addr := serveTCP(t, svc)
	for _, c := range []struct{ body, want string }{
		{`{"recipe": "/r.toml"}}`, "data after the object"},
		{`{"recipe": "/r.toml"} {}`, "data after the object"},
		{`{"Recipe": "/r.toml"}`, `unknown key \"Recipe\"`},
		{`{"recipe": "/a.toml", "recipe": "/b.toml"}`, `key \"recipe\" given twice`},
		{`{"recipe": "/r.toml", "ttl_seconds": 1e10}`, "ttl_seconds at most"},
		{`{"recipe": "/r.toml", "wait_seconds": 1e10}`, "wait_seconds is at most"},
		{`{"recipe": "/r.toml", "pid": -1}`, "must not be negative"},
		{`[]`, "one JSON object"},
		{``, "empty request body"},
	} {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/leases", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(b.String(), c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, resp.StatusCode, b.String(), c.want)
		}
	}
	if svc.acquired != 0 {
		t.Errorf("%d bad requests reached the service", svc.acquired)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/leases", strings.NewReader(`{"recipe": "/r.toml", "ttl_seconds": 60}`))
	req.Header.Set("Authorization", "Bearer secret")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("a good request: %v %v", resp, err)
	}
}

// A TCP caller without the token gets 401 and its connection closed: no
// idle connections kept for strangers (issue 12 M4).
func TestTCPStrangersAreHungUpOn(t *testing.T) {
	addr := serveTCP(t, &stub{})
	var conns []net.Conn
	for i := 0; i < 20; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte("GET /v1/leases HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("conn %d: %v", i, err)
		}
		if resp.StatusCode != 401 || !resp.Close {
			t.Errorf("conn %d: %d, close %v; want 401 and close", i, resp.StatusCode, resp.Close)
		}
		_, _ = bufio.NewReader(resp.Body).WriteTo(&strings.Builder{})
		// The server hangs up: the next read ends, it does not time out.
		if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Errorf("conn %d still open after 401: %v", i, err)
		}
		c.Close()
	}
}

// More than MaxTCPConns token holders' connections wait for a free slot
// instead of each getting a goroutine and a buffer.
func TestTCPConnectionCap(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := newSlots(l, 2, 16, time.Minute)
	defer ll.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := ll.Accept()
			if err != nil {
				return
			}
			c.(*slotConn).promote() // as if each had shown the token
			accepted <- c
		}
	}()
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	first, second := <-accepted, <-accepted
	select {
	case <-accepted:
		t.Fatal("a third connection was accepted while two were open")
	case <-time.After(300 * time.Millisecond):
	}
	first.Close()
	select {
	case c := <-accepted:
		c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the third connection was not accepted after one closed")
	}
	second.Close()
}

// Strangers' connections are capped apart: a new one hangs up on the
// oldest, and one that shows no token in time is hung up on.
func TestTCPStrangerBudget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := newSlots(l, 2, 2, 500*time.Millisecond)
	defer ll.Close()
	go func() {
		for {
			if _, err := ll.Accept(); err != nil {
				return
			}
		}
	}()
	var cs []net.Conn
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cs = append(cs, c)
	}
	_ = cs[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := cs[0].Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Errorf("the oldest of three strangers with room for two was not hung up on: %v", err)
	}
	for i, c := range cs[1:] {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
			t.Errorf("stranger %d was not hung up on after its grace: %v", i+1, err)
		}
	}
}
