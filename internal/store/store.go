// Package store lays out the directory that holds goldens, instances and
// locks, and knows who owns what inside it.
package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

// Store is an opened store directory.
//
//	ROOT/goldens/KEY/{manifest.json,data/}   complete goldens
//	ROOT/goldens/tmp-KEY-RAND/               builds in progress (or crashed)
//	ROOT/instances/ID/{state.json,lock,data/,sock/,server.log,...}
//	ROOT/locks/KEY.lock                      one build of one key at a time
//	ROOT/cache/                              input hash cache
type Store struct {
	Root string
	User User // who runs servers and owns clones
	// CowExtSize, when not nil, replaces the XFS copy-on-write extent
	// size hint new instance dirs get (one engine page; 0 keeps the
	// filesystem's default): DBFORK_XFS_COWEXTSIZE, a knob for measuring
	// (docs/performance.md), read at the edge (CowExtSizeSetting).
	CowExtSize *uint32
}

// CowExtSizeSetting turns the value of DBFORK_XFS_COWEXTSIZE, as the edge
// looked it up, into Options.CowExtSize: nil when unset, 0 (the
// filesystem's default) when it is not a number.
func CowExtSizeSetting(v string, set bool) *uint32 {
	if !set {
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		n = 0
	}
	sz := uint32(n)
	return &sz
}

// DefaultRoot is where a store lives when none is named: /var/lib/dbfork
// as root, else dataHome/dbfork, where dataHome is $XDG_DATA_HOME as the
// edge read it, else ~/.local/share.
func DefaultRoot(dataHome string) string {
	if os.Geteuid() == 0 {
		return "/var/lib/dbfork"
	}
	if dataHome != "" {
		return filepath.Join(dataHome, "dbfork")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), fmt.Sprintf("dbfork-%d", os.Getuid()))
	}
	return filepath.Join(home, ".local", "share", "dbfork")
}

// Open opens (creating it if needed) the store at root as it is: a new
// store is a plain directory. See OpenWith.
func Open(root string) (*Store, error) { return OpenWith(root, Options{}) }

// OpenWith creates the store layout if needed (on an XFS image of its own
// when o.AutoImage says so and the filesystem cannot share extents),
// remounts a loop-backed store after a reboot, and resolves the server
// user. As root it refuses a store path others could change, and puts a
// plain store on a nosuid,nodev bind mount of itself (nosuid.go).
func OpenWith(root string, o Options) (*Store, error) {
	if root == "" {
		return nil, errs.Invalid("no store path given (store.Locate finds the default one)")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, errs.Invalid("store %s: %w", root, err)
	}
	if strings.ContainsAny(abs, ",:\\\n") {
		return nil, errs.Invalid("store path %q has a comma, colon, backslash or newline; pick a plainer path with --store", abs)
	}
	if err := checkSecurePath(abs); err != nil {
		return nil, err
	}
	if o.AutoImage && os.Geteuid() == 0 {
		if _, err := os.Lstat(abs); errors.Is(err, os.ErrNotExist) {
			if err := autoImage(abs, o); err != nil {
				return nil, err
			}
		}
	}
	if err := ensureLoopMounted(abs); err != nil {
		return nil, err
	}
	u, err := ServerUser()
	if err != nil {
		return nil, err
	}
	s := &Store{Root: abs, User: u, CowExtSize: o.CowExtSize}
	for _, d := range []string{abs, s.GoldensDir(), s.InstancesDir(), s.LocksDir(), s.CacheDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create store dir %s: %w", d, err)
		}
	}
	if err := checkReachable(abs, u); err != nil {
		return nil, err
	}
	if err := ensureNoSuid(abs, o); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) GoldensDir() string   { return filepath.Join(s.Root, "goldens") }
func (s *Store) InstancesDir() string { return filepath.Join(s.Root, "instances") }
func (s *Store) LocksDir() string     { return filepath.Join(s.Root, "locks") }
func (s *Store) CacheDir() string     { return filepath.Join(s.Root, "cache") }

// GoldenDir is where the golden with this key lives once published.
func (s *Store) GoldenDir(key string) string { return filepath.Join(s.GoldensDir(), key) }

// InstanceDir is the private directory of one instance.
func (s *Store) InstanceDir(id string) string { return filepath.Join(s.InstancesDir(), id) }

// BuildLock is the lock file that serialises builds of one key.
func (s *Store) BuildLock(key string) string { return filepath.Join(s.LocksDir(), key+".lock") }

// checkReachable makes sure the unprivileged server user can walk down to
// the store: a root-owned 0700 parent would make every server fail with
// "permission denied" deep inside its log.
func checkReachable(root string, u User) error {
	if !u.Dropped() {
		return nil
	}
	for d := root; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return errs.Invalid("the server user %s cannot enter %s (mode %v); run `chmod o+x %s` or choose another --store", u.Name, d, fi.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
