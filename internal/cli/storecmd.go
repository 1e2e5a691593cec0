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
	var fstype, size string
	initCmd := &cobra.Command{
		Use:   "init --fs xfs|btrfs --size N",
		Short: "Create a loop-backed XFS (reflink) or btrfs store (root; sparse image beside the store, remounted on demand)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			root := g.store
			if root == "" {
				root = store.DefaultRoot()
			}
			root, _ = filepath.Abs(root)
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
	initCmd.Flags().StringVar(&fstype, "fs", "xfs", "filesystem: xfs (reflink) or btrfs (snapshots)")
	initCmd.Flags().StringVar(&size, "size", "20G", "image size (sparse: only what is written uses disk)")

	umountCmd := &cobra.Command{
		Use:   "umount",
		Short: "Unmount a loop-backed store (refused while instances run on it)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			root := g.store
			if root == "" {
				root = store.DefaultRoot()
			}
			root, _ = filepath.Abs(root)
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
	cmd.AddCommand(initCmd, umountCmd)
	return cmd
}
