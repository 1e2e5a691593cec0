package api

import (
	"net/http"
	"sync"
	"time"
)

// activity counts calls in flight and remembers when the last one ended,
// so a daemon started on demand can leave once nobody has used it for a
// while.
type activity struct {
	mu       sync.Mutex
	inFlight int
	last     time.Time
}

func (a *activity) track(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/health" && !r.URL.Query().Has("touch") {
			next.ServeHTTP(w, r) // looking is not using
			return
		}
		a.mu.Lock()
		a.inFlight++
		a.mu.Unlock()
		defer func() {
			a.mu.Lock()
			a.inFlight--
			a.last = time.Now()
			a.mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}

// IdleFor is how long no call has been running: zero while one runs, else
// the time since the last one ended (or since the server was made).
func (s *Server) IdleFor() time.Duration {
	s.act.mu.Lock()
	defer s.act.mu.Unlock()
	if s.act.inFlight > 0 {
		return 0
	}
	return time.Since(s.act.last)
}
