package engine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// StartOnFreePort tries TryPorts first, then kernel-picked ports, and
// retries only while the log says the port was taken; a port the caller
// fixed is tried again, the same port, after a pause.
func TestStartOnFreePort(t *testing.T) {
	log := filepath.Join(t.TempDir(), "server.log")
	taken := []string{"Address already in use"}
	var tried []int
	startTaken := func(port int) (*Server, error) {
		tried = append(tried, port)
		if err := os.WriteFile(log, []byte("FATAL: could not bind: Address already in use\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return nil, errors.New("taken")
	}
	_, err := StartOnFreePort(StartSpec{LogFile: log, TryPorts: []int{1, 2}}, taken, startTaken)
	if err == nil || len(tried) != startTries || !reflect.DeepEqual(tried[:2], []int{1, 2}) || tried[2] == 0 {
		t.Fatalf("tried %v, err %v: want ports 1, 2, then %d-2 free ones and the last error", tried, err, startTries)
	}

	fixedPortPause = time.Millisecond
	tried = nil
	if _, err := StartOnFreePort(StartSpec{LogFile: log, Port: 7}, taken, startTaken); err == nil || !reflect.DeepEqual(tried, []int{7, 7, 7, 7, 7}) {
		t.Fatalf("a fixed port always taken was tried %v (err %v): want %d times, then its error", tried, err, startTries)
	}
	tried = nil
	srv, err := StartOnFreePort(StartSpec{LogFile: log, Port: 7}, taken, func(port int) (*Server, error) {
		if len(tried) < 2 {
			return startTaken(port)
		}
		tried = append(tried, port)
		return &Server{Port: port}, nil
	})
	if err != nil || srv.Port != 7 || !reflect.DeepEqual(tried, []int{7, 7, 7}) {
		t.Fatalf("a fixed port taken for a moment: %+v %v after %v, want a server on 7 at the third try", srv, err, tried)
	}

	tried = nil
	other := func(port int) (*Server, error) {
		tried = append(tried, port)
		_ = os.WriteFile(log, []byte("FATAL: bad setting\n"), 0o600)
		return nil, errors.New("bad setting")
	}
	if _, err := StartOnFreePort(StartSpec{LogFile: log, TryPorts: []int{3}}, taken, other); err == nil || len(tried) != 1 {
		t.Fatalf("another failure was retried: %v (err %v)", tried, err)
	}

	srv, err = StartOnFreePort(StartSpec{LogFile: log, TryPorts: []int{4}}, taken, func(port int) (*Server, error) {
		return &Server{Port: port}, nil
	})
	if err != nil || srv.Port != 4 {
		t.Fatalf("got %+v, %v: want a server on port 4", srv, err)
	}
}
