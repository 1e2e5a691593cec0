package cli

import (
	"fmt"
	"os"
	"os/user"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

// UserStoresEnv moves where per-user stores live (default
// /var/lib/dbfork-users): read here, for root's set-up commands and for
// every user's default store alike.
const UserStoresEnv = "DBFORK_USER_STORES"

func userStoresDir() string {
	if d := os.Getenv(UserStoresEnv); d != "" {
		return d
	}
	return store.DefaultUserStores
}

// locateStore applies the one rule for the store (store.Locate): --store,
// $DBFORK_STORE, root's /var/lib/dbfork, the user's own store made by
// `sudo dbfork store init --user`, else $XDG_DATA_HOME/dbfork.
func (g *globals) locateStore() (string, error) {
	named := g.store
	if named == "" {
		named = os.Getenv("DBFORK_STORE")
	}
	return store.Locate(named, userStoresDir(), os.Getenv("XDG_DATA_HOME"))
}

// sudoUserName is the user behind sudo ("" when not under sudo, or when
// that user is root).
func sudoUserName() string {
	if os.Geteuid() != 0 || os.Getenv("SUDO_UID") == "" || os.Getenv("SUDO_UID") == "0" {
		return ""
	}
	u, err := user.LookupId(os.Getenv("SUDO_UID"))
	if err != nil {
		return ""
	}
	return u.Username
}

// userStoreFlags are the flags of the store commands that act on a user's
// store; fstab is hidden (tests give their own file).
type userStoreFlags struct {
	user  string
	fstab string
}

func (f *userStoreFlags) add(cmd *cobra.Command, what string) {
	cmd.Flags().StringVar(&f.user, "user", "", what)
	cmd.Flags().StringVar(&f.fstab, "fstab", "/etc/fstab", "the fstab that remounts user stores at boot")
	_ = cmd.Flags().MarkHidden("fstab")
}

func (f *userStoreFlags) stores() store.UserStores {
	return store.UserStores{Base: userStoresDir(), Fstab: f.fstab}
}

// userForInit is whose store `store init` makes: --user, else under plain
// sudo (no --store, no $DBFORK_STORE) the user behind it; "" for a store
// at a path (root's own, or --store).
func (g *globals) userForInit(f *userStoreFlags) string {
	if f.user != "" {
		return f.user
	}
	if g.store != "" || os.Getenv("DBFORK_STORE") != "" {
		return ""
	}
	return sudoUserName()
}

func initUserStore(g *globals, f *userStoreFlags, name, fstype, size string, sized bool) error {
	if err := store.CheckLoopFS(fstype); err != nil {
		return err
	}
	var n int64
	if sized {
		var err error
		if n, err = fsutil.ParseSize(size); err != nil {
			return err
		}
	}
	s, err := f.stores().Init(name, fstype, n)
	if err != nil {
		return err
	}
	fi, _ := os.Stat(s.Image)
	fmt.Fprintf(g.stdout, "store of %s: %s (%s in %s, %s sparse, mounted nosuid,nodev; remounted at boot by %s); %s's dbfork uses it by default\n",
		s.Name, s.Root, fstype, s.Image, humanBytes(fi.Size()), f.fstab, s.Name)
	return nil
}

func newStoreRmCmd(g *globals) *cobra.Command {
	var f userStoreFlags
	cmd := &cobra.Command{
		Use:   "rm --user NAME",
		Short: "Remove a user's store (root): unmount it, remove its image, mount point and fstab entry (refused while it is in use)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.user == "" {
				return errs.Invalid("store rm needs --user NAME: the user whose store to remove")
			}
			if err := f.stores().Remove(f.user); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "store of %s removed\n", f.user)
			return nil
		},
	}
	f.add(cmd, "the user whose store to remove")
	return cmd
}
