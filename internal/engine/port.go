package engine

import (
	"net"
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
