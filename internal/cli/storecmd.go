package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/dbfork/dbfork/internal/errs"
	"github.com/dbfork/dbfork/internal/fsutil"
	"github.com/dbfork/dbfork/internal/store"
)

func newStoreCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "store", Short: "Manage the store's filesystem"}
	cmd.AddCommand(newStoreInitCmd(g), newStoreMountCmd(g), newStoreUmountCmd(g), newStoreRmCmd(g))
	return cmd
}

func newStoreInitCmd(g *globals) *cobra.Command {
	var fstype, size string
	var uf userStoreFlags
	initCmd := &cobra.Command{
		Use:   "init [--user NAME] --fs xfs|btrfs|plain --size N",
		Short: "Create a user's copy-on-write store (root: --user, or the user behind sudo), or a loop-backed XFS (reflink) or btrfs store at --store (sparse image beside it, remounted on demand), or a plain one",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if name := g.userForInit(&uf); name != "" {
				return initUserStore(g, &uf, name, fstype, size, cmd.Flags().Changed("size"))
			}
			root, err := g.storeRoot()
			if err != nil {
				return err
			}
			if fstype == "plain" {
				return initPlainStore(g, root)
			}
			n, err := fsutil.ParseSize(size)
			if err != nil {
				return err
			}
			img := store.ImagePath(root)
			if err := store.CreateLoopFS(img, root, fstype, n); err != nil {
				return err
			}
			if _, err := store.Open(root); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "store %s is a %s filesystem in %s (%s, sparse)\n", root, fstype, img, humanBytes(n))
			return nil
		},
	}
	initCmd.Flags().StringVar(&fstype, "fs", "xfs", "filesystem: xfs (reflink), btrfs (snapshots), or plain (a directory where it is, no image)")
	initCmd.Flags().StringVar(&size, "size", "20G", "image size (sparse: only what is written uses disk; a user store's default is most of the free space, up to 256G)")
	uf.add(initCmd, "make this user's store under "+store.DefaultUserStores+" (default under sudo without --store: the user behind sudo)")
	return initCmd
}

// initPlainStore makes a plain store: the explicit opt-out of an
// automatic image.
func initPlainStore(g *globals, root string) error {
	if _, err := os.Lstat(root); err == nil {
		return errs.Conflict("store %s already exists; dbfork leaves existing stores as they are", root)
	}
	if _, err := store.Open(root); err != nil {
		return err
	}
	fs, _ := fsutil.FSType(root)
	fmt.Fprintf(g.stdout, "store %s is a plain directory on %s\n", root, fs)
	return nil
}

func newStoreUmountCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "umount",
		Short: "Unmount a loop-backed store (refused while instances run on it)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, err := g.storeRoot()
			if err != nil {
				return err
			}
			if _, err := os.Stat(store.ImagePath(root)); err != nil {
				return errs.NotFound("%s is not a loop-backed store (no %s)", root, store.ImagePath(root))
			}
			mounted, err := fsutil.MountsUnder(root)
			if err != nil {
				return err
			}
			if len(mounted) > 1 {
				return errs.Conflict("instances are still mounted under %s; run `dbfork down --all` first", root)
			}
			if entries, _ := os.ReadDir(filepath.Join(root, "instances")); len(entries) > 0 {
				return errs.Conflict("instances still exist under %s; run `dbfork down --all` first", root)
			}
			return store.UnmountImage(root)
		},
	}
}

func newStoreMountCmd(g *globals) *cobra.Command {
	var uf userStoreFlags
	cmd := &cobra.Command{
		Use:   "mount [--user NAME]",
		Short: "Mount a loop-backed store's image (done on demand anyway), or a user's store by its fstab entry; adopts a root-owned image made before dbfork recorded its images",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if uf.user != "" {
				s, err := uf.stores().Mount(uf.user)
				if err == nil {
					fmt.Fprintf(g.stdout, "store of %s mounted at %s\n", s.Name, s.Root)
				}
				return err
			}
			root, err := g.storeRoot()
			if err != nil {
				return err
			}
			if os.Geteuid() != 0 {
				return errs.Unsupported("mounting a store image needs root: sudo dbfork --store %s store mount", root)
			}
			return store.AdoptImage(root)
		},
	}
	uf.add(cmd, "mount this user's store (made by store init --user)")
	return cmd
}
