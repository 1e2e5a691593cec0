package store_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbfork/dbfork/internal/proc"
	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// Each claim gets a uid nobody else holds; releasing kills what runs as
// it (children that left their session included) and frees it; a claim
// whose owner is gone is swept the same way, a live one is not.
func TestClaimUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (uids are handed out by root); CI runs as root")
	}
	ctx := context.Background()
	root, s, a, b := claimOwners(t)
	ua, err := s.ClaimUser(a)
	if err != nil {
		t.Fatal(err)
	}
	ub, err := s.ClaimUser(b)
	if err != nil {
		t.Fatal(err)
	}
	if ua.UID == ub.UID || !store.IsDynamicUID(ua.UID) || !store.IsDynamicUID(ub.UID) || ua.GID != ua.UID {
		t.Fatalf("claims: %+v %+v", ua, ub)
	}
	if len(ua.Groups) != 1 || int(ua.Groups[0]) != s.User.GID {
		t.Fatalf("supplementary groups %v, want the server user's group %d only", ua.Groups, s.User.GID)
	}
	pa, pb := spawn(t, ua), spawn(t, ub)
	// Releasing with the wrong owner does nothing.
	if err := store.ReleaseUser(ctx, ua.UID, b); err != nil || !pa.Alive() {
		t.Fatalf("a release by the wrong owner acted: %v", err)
	}
	if err := store.ReleaseUser(ctx, ua.UID, a); err != nil {
		t.Fatal(err)
	}
	if pa.Alive() || len(proc.OfUID(ua.UID)) > 0 {
		t.Fatal("processes of a released uid still run")
	}
	if _, err := os.Stat(filepath.Join(store.ClaimsDir, strconv.Itoa(ua.UID))); !os.IsNotExist(err) {
		t.Fatalf("claim still there: %v", err)
	}
	// b's owner exists: not swept. Once it is gone: swept, processes too.
	if _, err := store.SweepUsers(ctx); err != nil || !pb.Alive() {
		t.Fatalf("a live claim was swept: %v", err)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	freed, err := store.SweepUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(freed, ub.UID) || pb.Alive() {
		t.Fatalf("stale claim %d not swept (freed %v) or its process alive", ub.UID, freed)
	}
	// A crashed build's dir is reaped by its path: the claim naming it goes.
	c := filepath.Join(root, "c")
	if err := os.Mkdir(c, 0o700); err != nil {
		t.Fatal(err)
	}
	uc, err := s.ClaimUser(c)
	if err != nil {
		t.Fatal(err)
	}
	pc := spawn(t, uc)
	if err := store.ReleaseOwned(ctx, c); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(store.ClaimsDir, strconv.Itoa(uc.UID))); pc.Alive() || !os.IsNotExist(err) {
		t.Fatalf("ReleaseOwned left the claim (%v) or its process", err)
	}
}

// spawn starts, as u, a shell whose child leaves its session: it must
// die with the uid all the same.
func spawn(t *testing.T, u store.User) proc.Identity {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!")
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.Credential()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	id, err := proc.Of(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = id.Signal(syscall.SIGKILL) })
	return id
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// claimOwners opens a store in a test dir and makes two owner dirs, a and
// b, to claim uids for.
func claimOwners(t *testing.T) (root string, s *store.Store, a, b string) {
	t.Helper()
	root = testenv.Dir(t)
	s, err := store.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return root, s, a, b
}
