package cli

import (
	"os"
	"testing"

	"github.com/dbfork/dbfork/internal/api"
)

// Which callers of a daemon may use its own registry credentials.
func TestOwnCredentials(t *testing.T) {
	me := os.Geteuid()
	for _, tc := range []struct {
		p         api.Peer
		inRequest bool
		want      bool
	}{
		{api.Peer{}, false, true},                        // serve -f
		{api.Peer{Unix: false}, true, true},              // TCP, with the token
		{api.Peer{Unix: true, UID: me}, true, true},      // the daemon's own user
		{api.Peer{Unix: true, UID: me + 1}, true, false}, // anyone else on the socket
		{api.Peer{Unix: true, UID: -1}, true, false},     // unknown peer
	} {
		if got := ownCredentials(tc.p, tc.inRequest); got != tc.want {
			t.Errorf("%+v in request %v: got %v", tc.p, tc.inRequest, got)
		}
	}
}
