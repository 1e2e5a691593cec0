package api

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// Strangers holding every TCP connection idle, or sending their headers a
// byte at a time, must not keep a token holder out (issue 29, the lows):
// the token holder's request succeeds before a client timeout well under
// the old 10 s header timeout the strangers could hold each slot for.
func TestTCPStrangersCannotStallTokenHolders(t *testing.T) {
	addr := serveTCP(t, &stub{})
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < MaxTCPConns+8; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	stop := make(chan struct{})
	defer close(stop)
	for i := 0; i < 8; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		go func() { // slow headers: one byte every 100 ms, never finished
			line := []byte("GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				b := []byte{'a'}
				if len(line) > 0 {
					b, line = line[:1], line[1:]
				}
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // let the server take them all in
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/health", nil)
		req.Header.Set("Authorization", "Bearer secret")
		req.Close = true // a new connection each time
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("token holder's request %d behind %d idle strangers: %v", i, len(conns), err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("token holder's request %d: %d", i, resp.StatusCode)
		}
	}
}
