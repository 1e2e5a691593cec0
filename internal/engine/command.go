package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"

	"github.com/dbfork/dbfork/internal/caller"
)

// RunCommand runs a recipe's shell command (a migration tool) in the
// recipe dir with the build server's connection environment. A failure
// reports the exit status and the tail of the command's output.
func RunCommand(ctx context.Context, b Build, st Step, connEnv map[string]string, out LogWriter) error {
	cmd := exec.Command("/bin/sh", "-c", st.Command)
	cmd.Dir = b.Dir
	base, whose := stepEnv(ctx, b)
	cmd.Env = WithClientPath(base, connEnv)
	if se := stepEnvFrom(ctx); se != nil {
		// The environment is the caller's own, already cut to what a
		// step needs: nothing of this process's to keep from them.
		if c := caller.From(ctx); c != nil && !c.OwnEnv {
			own := *c
			own.OwnEnv = true
			ctx = caller.With(ctx, func() *caller.Caller { return &own })
		}
	}
	tailBuf := &ringBuffer{max: 4096}
	errLine := &errorLine{}
	cmd.Stdout = io.MultiWriter(out, tailBuf, errLine)
	cmd.Stderr = cmd.Stdout
	// Its own process group, so cancelling kills the whole pipeline.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	as := AsCaller(ctx, b, cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w%s", st.Name, err, as)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	status := err.Error()
	if ee, ok := err.(*exec.ExitError); ok {
		status = fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	lines := strings.Split(strings.TrimRight(tailBuf.String(), "\n"), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	hint := envHint(cmd.Env, whose)
	if first := errLine.String(); first != "" && !strings.Contains(strings.Join(lines, "\n"), first) {
		return fmt.Errorf("command %q failed with %s: %s (output ends: %s; %s)", st.Command, status, first, strings.Join(lines, " | "), hint)
	}
	return fmt.Errorf("command %q failed with %s; output ends: %s (%s)", st.Command, status, strings.Join(lines, " | "), hint)
}

// AsCaller makes cmd (a recipe's command, or a client tool loading its
// SQL and dumps) run as the user who asked for the build: their uid,
// groups, HOME and USER, and TCP with the build server's password instead
// of the server's private socket dir. So what a recipe or its seed files
// contain (a psql `\!`, `\o |cmd`, `\copy … to FILE`) runs with that
// user's rights. Who wrote the recipe changes nothing: under sudo or for
// a daemon's peer the commands are always that user's (a recipe dir is a
// path, and a path can be swapped between a check and its use). Only
// without such a user (root itself asked) cmd stays as it is. The result
// is a note for error messages ("" when unchanged).
func AsCaller(ctx context.Context, b Build, cmd *exec.Cmd) string {
	c := caller.From(ctx)
	if c == nil {
		return ""
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.GID), Groups: c.Groups}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = callerEnv(cmd.Env, c)
	return fmt.Sprintf(" (recipe steps run as the user who asked, uid %d: they must be able to enter %s)", c.UID, b.Dir)
}

// ringBuffer keeps the last max bytes written to it.
type ringBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (r *ringBuffer) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if len(r.buf) > r.max {
		r.buf = r.buf[len(r.buf)-r.max:]
	}
	return len(p), nil
}

func (r *ringBuffer) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}
