package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// asCallerCmd is argv run with the rights of the user ctx acts for, or
// nil when that is this process.
func asCallerCmd(ctx context.Context, argv ...string) *exec.Cmd {
	c := callerFrom(ctx)
	if c == nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.GID), Groups: c.Groups}}
	return cmd
}

// MaxRecipeBytes caps a recipe file read for someone else.
const MaxRecipeBytes = 1 << 20

// ReadAsCaller reads a small file (a recipe) with the rights of the user
// ctx acts for: a daemon running as root must not parse, and echo in its
// errors, a file that user could not read. Without such a user it reads
// the file itself.
func ReadAsCaller(ctx context.Context, path string) ([]byte, error) {
	cmd := asCallerCmd(ctx, "/usr/bin/head", "-c", fmt.Sprint(MaxRecipeBytes+1), "--", path)
	if cmd == nil {
		return os.ReadFile(path)
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s cannot be read by uid %d: %s", path, callerFrom(ctx).UID, reason(stderr.String()))
	}
	if out.Len() > MaxRecipeBytes {
		return nil, fmt.Errorf("%s is over %d bytes: not a recipe", path, MaxRecipeBytes)
	}
	return out.Bytes(), nil
}

// CallerCanRead checks that the user ctx acts for may read every path
// (access(2) with their uid): a golden built from a file they cannot read
// must not be handed to them because their recipe names the same file.
func CallerCanRead(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	argv := append([]string{"/bin/sh", "-c", `for f; do [ -r "$f" ] || { printf '%s\n' "$f"; exit 1; }; done`, "sh"}, paths...)
	cmd := asCallerCmd(ctx, argv...)
	if cmd == nil {
		return nil
	}
	out, err := cmd.Output()
	if err != nil {
		if bad := strings.TrimSpace(string(out)); bad != "" {
			return fmt.Errorf("input %s cannot be read by uid %d (the user who asked): builds read inputs with their rights", bad, callerFrom(ctx).UID)
		}
		return fmt.Errorf("checking that uid %d can read the recipe's inputs: %v", callerFrom(ctx).UID, err)
	}
	return nil
}

// reason is the tail of a tool's "cannot open …: Permission denied".
func reason(stderr string) string {
	s := strings.TrimSpace(stderr)
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	if s == "" {
		return "unreadable"
	}
	return s
}
