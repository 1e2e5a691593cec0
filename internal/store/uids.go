package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/proc"
)

// As root, every instance and every build runs its server under a uid
// (and gid) of its own, taken from a range no account uses, as systemd's
// DynamicUser does: a test's SQL runs programs as that uid (COPY … TO
// PROGRAM), so sharing one uid would let it reach every other instance's
// socket, files and processes. The uid has supplementary group dbfork,
// which a golden's files are shared with (see golden.Share); what a
// clone makes is its own.
//
// A claim is a file CLAIMS/UID naming its owner: the absolute path of
// the instance or build dir it serves, which exists for as long as the
// uid is in use. Claims are machine-wide (every store on the machine
// draws from the one range) and live on /run, so a reboot, which ends
// every process, also ends every claim.
const (
	FirstDynamicUID = 0x7A000000 // 2046820352: above subuid ranges, below 2^31
	DynamicUIDs     = 1 << 16
)

// ClaimsDir holds the uid claims (root-only).
var ClaimsDir = "/run/dbfork/uids"

// IsDynamicUID reports whether uid is one dbfork hands out.
func IsDynamicUID(uid int) bool {
	return uid >= FirstDynamicUID && uid < FirstDynamicUID+DynamicUIDs
}

// ClaimUser gives owner (an existing dir, absolute) a uid and gid of its
// own, with the server user's group as its one supplementary group. When
// dbfork does not run as root there is no second user to give: the
// server user (the caller) is returned and nothing is claimed.
func (s *Store) ClaimUser(owner string) (User, error) {
	if !s.User.Dropped() {
		return s.User, nil
	}
	uid, err := ClaimUID(owner)
	if err != nil {
		return User{}, err
	}
	return s.UserOf(uid), nil
}

// ClaimUID claims a dynamic uid (and the gid of the same number) for
// owner, with no group attached: for work that must reach nothing of any
// store (an engine fetch's downloader and unpacker). Root only.
func ClaimUID(owner string) (int, error) {
	if !filepath.IsAbs(owner) || strings.ContainsRune(owner, '\n') {
		return 0, fmt.Errorf("uid owner %q is not a plain absolute path", owner)
	}
	if err := os.MkdirAll(ClaimsDir, 0o700); err != nil {
		return 0, fmt.Errorf("create uid claims dir: %w", err)
	}
	tmp, err := os.CreateTemp(ClaimsDir, "new-")
	if err != nil {
		return 0, fmt.Errorf("claim a uid: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(owner + "\n")
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		return 0, fmt.Errorf("claim a uid: %v %v", werr, cerr)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	start := int(binary.LittleEndian.Uint32(b[:]) % DynamicUIDs)
	for i := 0; i < DynamicUIDs; i++ {
		uid := FirstDynamicUID + (start+i)%DynamicUIDs
		if inUse(uid) {
			continue
		}
		// A hard link appears whole or not at all: a claim is never seen
		// without its owner.
		err := os.Link(tmp.Name(), claimPath(uid))
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("claim uid %d: %w", uid, err)
		}
		return uid, nil
	}
	return 0, errs.Busy("all %d dynamic uids are in use: run `dbfork gc`", DynamicUIDs)
}

// UserOf is the user a claimed uid stands for.
func (s *Store) UserOf(uid int) User {
	if !IsDynamicUID(uid) {
		return s.User
	}
	return User{Name: ServerUserName + "-" + strconv.Itoa(uid), UID: uid, GID: uid, Groups: []uint32{uint32(s.User.GID)}}
}

// inUse: an account or group has this id, or a process runs as it (not
// ours: claims are removed only after their processes are gone).
func inUse(uid int) bool {
	if _, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return true
	}
	if _, err := user.LookupGroupId(strconv.Itoa(uid)); err == nil {
		return true
	}
	if inSubIDRange("/etc/subuid", uid) || inSubIDRange("/etc/subgid", uid) {
		return true // some user's containers map to it
	}
	return len(proc.OfUID(uid)) > 0
}

// inSubIDRange reports whether id lies in a range of an /etc/subuid-style
// file (name:first:count lines).
func inSubIDRange(file string, id int) bool {
	data, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 {
			continue
		}
		first, err1 := strconv.Atoi(f[1])
		n, err2 := strconv.Atoi(f[2])
		if err1 == nil && err2 == nil && id >= first && id < first+n {
			return true
		}
	}
	return false
}

func claimPath(uid int) string { return filepath.Join(ClaimsDir, strconv.Itoa(uid)) }

// claimOwner is the owner a claim names ("" when there is none).
func claimOwner(uid int) string {
	b, err := os.ReadFile(claimPath(uid))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// KillUserProcesses kills every process of uid if uid is still claimed
// by owner (nothing else: after a crash the claim may have passed on).
func KillUserProcesses(ctx context.Context, uid int, owner string) error {
	if !IsDynamicUID(uid) || claimOwner(uid) != owner {
		return nil
	}
	return proc.KillUID(ctx, uid)
}

// ReleaseUser ends owner's claim on uid: its processes are killed first,
// so the next holder of the uid finds none. A claim held by someone else
// by now is left alone.
func ReleaseUser(ctx context.Context, uid int, owner string) error {
	if !IsDynamicUID(uid) || claimOwner(uid) != owner {
		return nil
	}
	if err := proc.KillUID(ctx, uid); err != nil {
		return err
	}
	return DropClaim(uid, owner)
}

// DropClaim ends owner's claim on uid once the caller has killed its
// processes itself (KillUserProcesses): a uid's processes can only be
// started by the uid itself, so none came back.
func DropClaim(uid int, owner string) error {
	if !IsDynamicUID(uid) || claimOwner(uid) != owner {
		return nil
	}
	removeIPC(uid)
	if err := os.Remove(claimPath(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release uid %d: %w", uid, err)
	}
	return nil
}

// ReleaseOwned releases every claim naming owner (a crashed build's dir,
// whose uid nobody recorded elsewhere), killing its processes first.
func ReleaseOwned(ctx context.Context, owner string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	ents, err := os.ReadDir(ClaimsDir)
	if err != nil {
		return nil // no claims at all
	}
	for _, e := range ents {
		if uid, aerr := strconv.Atoi(e.Name()); aerr == nil && IsDynamicUID(uid) && claimOwner(uid) == owner {
			if err := ReleaseUser(ctx, uid, owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// SweepUsers releases the claims whose owner is gone (an instance or
// build dbfork could not tear down itself), killing what still runs as
// them: what a test started does not outlive `gc`.
func SweepUsers(ctx context.Context) (freed []int, err error) {
	if os.Geteuid() != 0 {
		return nil, nil // only root hands out uids
	}
	ents, rerr := os.ReadDir(ClaimsDir)
	if errors.Is(rerr, os.ErrNotExist) {
		return nil, nil
	}
	if rerr != nil {
		return nil, rerr
	}
	for _, e := range ents {
		uid, aerr := strconv.Atoi(e.Name())
		if aerr != nil || !IsDynamicUID(uid) {
			continue
		}
		owner := claimOwner(uid)
		if owner == "" {
			continue
		}
		var st syscall.Stat_t
		if serr := syscall.Lstat(owner, &st); !errors.Is(serr, syscall.ENOENT) {
			continue // still there (or not knowable): in use
		}
		if rerr := ReleaseUser(ctx, uid, owner); rerr != nil {
			err = errors.Join(err, rerr)
			continue
		}
		freed = append(freed, uid)
	}
	return freed, err
}
