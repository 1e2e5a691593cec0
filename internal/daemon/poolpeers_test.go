package daemon_test

import (
	"testing"

	"github.com/dbfork/dbfork/internal/api"
	"github.com/dbfork/dbfork/internal/testenv"
)

// GET /v1/pools shows a socket peer only the pools it made or leased
// from: another user's recipe paths and golden keys are theirs (issue 29,
// the lows). Root and TCP token holders see every pool. The peer's own
// pools are checked as the real user in cli's TestDownAndResetOwnUpThroughDaemon.
func TestPoolsFilteredPerPeer(t *testing.T) {
	w := newWorld(t, "")
	l := w.acquire(api.AcquireRequest{})
	defer func() { _ = w.c.Release(t.Context(), l.ID) }()
	stranger := api.Peer{Unix: true, PID: 1, UID: testenv.UserUID, GID: testenv.UserGID}
	if ps := w.d.Pools(stranger); len(ps) != 0 {
		t.Errorf("uid %d sees root's pools: %+v", stranger.UID, ps)
	}
	for _, p := range []api.Peer{{Unix: true, UID: 0, GID: 0}, {}} {
		ps := w.d.Pools(p)
		if len(ps) != 1 || ps[0].Recipe != w.recipe {
			t.Errorf("peer %+v sees %+v, want root's pool of %s", p, ps, w.recipe)
		}
	}
}
