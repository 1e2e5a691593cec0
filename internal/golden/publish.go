package golden

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbfork/dbfork/internal/backend"
	"github.com/dbfork/dbfork/internal/faults"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/lockfile"
	"github.com/dbfork/dbfork/internal/store"
)

// Claim takes key's build lock for a caller that is about to make the
// golden some other way than Build (a pull, an import). When the golden
// exists already (before or after waiting for another process) it is
// returned and nothing is held. Otherwise the caller holds the lock until
// it calls release, and leftovers of crashed attempts at key are gone.
func Claim(ctx context.Context, s *store.Store, key string, onWait func(), log *slog.Logger) (g *Golden, release func(), err error) {
	if g, err := Lookup(s, key); err == nil {
		return g, nil, nil
	}
	lock, err := lockfile.Acquire(ctx, s.BuildLock(key), onWait)
	if err != nil {
		return nil, nil, err
	}
	if g, err := Lookup(s, key); err == nil {
		lock.Release()
		return g, nil, nil
	}
	if err := setAsideBroken(s, key); err != nil {
		lock.Release()
		return nil, nil, err
	}
	ReapBuilds(ctx, s, key, log)
	return nil, lock.Release, nil
}

// NewWorkDir makes a tmp-… dir in the store's goldens dir for key, with
// the key recorded so that gc reaps it once nobody holds key's lock. It
// holds an empty data dir. Both are root's alone (0700, as MkdirTemp
// makes them): a pull writes what a registry sent, as root, and no other
// uid may create or swap an entry under it meanwhile. The caller hands
// the finished tree to the server user.
func NewWorkDir(s *store.Store, key string) (string, error) {
	tmp, err := os.MkdirTemp(s.GoldensDir(), tmpPrefix)
	if err != nil {
		return "", fmt.Errorf("create work dir: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, keyFile), []byte(key+"\n"), 0o644); err != nil {
		return tmp, err
	}
	if err := backend.NewDataDir(filepath.Join(tmp, "data")); err != nil {
		return tmp, fmt.Errorf("create data dir: %w", err)
	}
	return tmp, nil
}

// Publish turns a work dir whose data/ is complete into the golden m
// describes: everything synced, the data frozen, the manifest written
// last, one rename into place. A crash at any point leaves either nothing
// visible or the complete golden. phase prefixes the crash points
// ("build", "pull").
func Publish(s *store.Store, tmp string, m *Manifest, phase string) (*Golden, error) {
	data := filepath.Join(tmp, "data")
	// A build handed its tree over before it listed it; a pulled tree is
	// handed over here whatever its manifest claims (stripping set-id
	// bits, refusing special files), as root and as a user alike.
	if phase != "build" || (s.User.Dropped() && !m.GroupShared) {
		if err := shareTree(data, m, s.User); err != nil {
			return nil, err
		}
	}
	// Loaders and pulls create files freely: every directory of the tree
	// is synced, so no entry is lost to a crash after the manifest says
	// the golden is complete.
	if _, err := fsutil.SyncDirs(data); err != nil {
		return nil, fmt.Errorf("sync golden: %w", err)
	}
	// From here the golden is only read. As root, the golden's dir becomes
	// root-only (clones reach the files as root: OverlayFS looks lower
	// files up with the mounter's credentials, reflink and copy run in
	// dbfork), and on btrfs the data subvolume becomes read-only.
	if err := os.Chmod(tmp, 0o700); err != nil {
		return nil, err
	}
	if err := backend.FreezeDataDir(data); err != nil {
		return nil, fmt.Errorf("make golden read-only: %w", err)
	}
	if n, err := fsutil.DistinctBytes(data); err == nil {
		// Before the manifest: a golden is complete once that is there.
		if b, err := json.Marshal(usage{n}); err == nil && fsutil.WriteFileAtomic(filepath.Join(tmp, UsageName), b, 0o644) == nil {
			m.DiskBytes = n
		}
	}
	mdata, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	// The manifest is written last: a dir without one is not a golden.
	if err := fsutil.WriteFileAtomic(filepath.Join(tmp, ManifestName), mdata, 0o644); err != nil {
		return nil, err
	}
	faults.At(phase + ":manifest")
	final := s.GoldenDir(m.Key)
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("publish golden: %w", err)
	}
	if err := fsutil.SyncDir(s.GoldensDir()); err != nil {
		return nil, err
	}
	// On a store image whose loop device drops flushes, the syncs above
	// reached the host's page cache only.
	if err := fsutil.SyncBacking(s.GoldensDir()); err != nil {
		return nil, err
	}
	faults.At(phase + ":published")
	return &Golden{Key: m.Key, Dir: final, Manifest: m}, nil
}

// Short is the 12-digit form of a key used in messages.
func Short(key string) string { return short(key) }

// ValidKey reports whether key looks like a golden key (64 hex digits).
func ValidKey(key string) bool { return validKey(key) }

// originFile, beside a golden's manifest, says where a golden that was
// not built here came from.
const originFile = "origin"

// WriteOrigin records in work dir tmp where the golden comes from (a
// registry reference and manifest digest, an imported file).
func WriteOrigin(tmp, origin string) error {
	return fsutil.WriteFileAtomic(filepath.Join(tmp, originFile), []byte(origin+"\n"), 0o644)
}

// Origin says where golden g came from: "build", or what WriteOrigin
// recorded.
func Origin(g *Golden) string {
	b, err := os.ReadFile(filepath.Join(g.Dir, originFile))
	if err != nil {
		return "build"
	}
	return strings.TrimSpace(string(b))
}
