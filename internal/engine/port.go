package engine

import (
	"net"
	"sync"
)

var forced struct {
	sync.Mutex
	ports []int
}

// ForcePorts makes the next calls of FreePort hand out these ports before
// asking the kernel. Tests hold a port and force it, to prove that a
// server finding its port taken is retried on another.
func ForcePorts(ports ...int) {
	forced.Lock()
	defer forced.Unlock()
	forced.ports = append(forced.ports, ports...)
}

// FreePort asks the kernel for a free loopback port. Another process can
// take it before the server binds it, so Start retries on a collision.
func FreePort() (int, error) {
	forced.Lock()
	if len(forced.ports) > 0 {
		p := forced.ports[0]
		forced.ports = forced.ports[1:]
		forced.Unlock()
		return p, nil
	}
	forced.Unlock()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
