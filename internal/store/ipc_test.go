package store_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/store"
	"github.com/dbfork/dbfork/internal/testenv"
)

// A killed server leaves its shared memory behind; freeing its uid
// removes it (POSIX segments in /dev/shm, System V segments), and only
// the claim's holder can free it.
func TestFreedUidLeavesNoSharedMemory(t *testing.T) {
	testenv.RequireRoot(t)
	root, s, a, b := claimOwners(t)
	u, err := s.ClaimUser(a)
	if err != nil {
		t.Fatal(err)
	}
	shm := filepath.Join("/dev/shm", "PostgreSQL.dbfork-test-"+filepath.Base(root))
	if err := os.WriteFile(shm, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(shm) })
	if err := os.Chown(shm, u.UID, u.UID); err != nil {
		t.Fatal(err)
	}
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 56, unix.IPC_CREAT|0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = unix.SysvShmCtl(id, unix.IPC_RMID, nil) })
	var desc unix.SysvShmDesc
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err != nil {
		t.Fatal(err)
	}
	desc.Perm.Uid, desc.Perm.Gid = uint32(u.UID), uint32(u.UID)
	if _, err := unix.SysvShmCtl(id, unix.IPC_SET, &desc); err != nil {
		t.Fatal(err)
	}
	// Not the holder: nothing is removed.
	if err := store.DropClaim(u.UID, b); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shm); err != nil {
		t.Fatalf("a drop by someone not holding the claim removed its memory: %v", err)
	}
	// Freed by its holder: both go.
	if err := store.DropClaim(u.UID, a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(shm); !os.IsNotExist(err) {
		t.Errorf("/dev/shm segment of a freed uid still there: %v", err)
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &desc); err == nil {
		t.Errorf("System V segment %d of a freed uid still there", id)
	}
}
