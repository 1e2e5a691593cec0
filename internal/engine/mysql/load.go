package mysql

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Load runs one recipe step: SQL files and mysqldump/mariadb-dump output
// through the command-line client (which handles DELIMITER and the rest
// of dump syntax), commands through sh with the MYSQL_* environment.
func (e *Engine) Load(ctx context.Context, srv *engine.Server, r engine.Build, st engine.Step, out engine.LogWriter) error {
	switch st.Kind {
	case engine.StepSQL, engine.StepDump:
		for i, f := range st.Files {
			if err := e.clientFile(ctx, srv, r, f, st.ShownName(r, i), out); err != nil {
				return err
			}
		}
		return nil
	case engine.StepRun:
		return engine.RunCommand(ctx, r, st, e.Conn(srv).Env, out)
	}
	return fmt.Errorf("unknown step kind %q", st.Kind)
}

// clientFile feeds one file to the command-line client on its standard
// input: the build opened it (a private copy of the bytes it hashed), so
// the client never opens a path that could be swapped. For dbfork's own
// builds the client runs as this process over the server's socket; for a
// build someone else asked for (engine.AsCaller) it runs as that user over
// 127.0.0.1 with the build password: what the file makes the client do
// (`system`, `\!`) is that user's rights, not root's. shown names the
// file in errors.
func (e *Engine) clientFile(ctx context.Context, srv *engine.Server, r engine.Build, file, shown string, out engine.LogWriter) error {
	in, _, err := engine.OpenInput(file)
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer in.Close()
	args := []string{"--no-defaults", "--batch", "--user=" + srv.User, "--database=" + srv.Database}
	if e.Bin.Info.Flavor == MariaDB {
		args = append(args, "--skip-ssl") // the servers run without TLS; 11.4's client requires it by default
	}
	cmd := exec.CommandContext(ctx, e.Bin.Client)
	cmd.Dir = r.Dir
	cmd.Env = engine.BaseEnv()
	cmd.Stdin = in
	as := engine.AsCaller(ctx, r, cmd)
	if as != "" {
		cmd.Env = append(cmd.Env, "MYSQL_PWD="+srv.Password)
		args = append(args, "--protocol=TCP", "--host=127.0.0.1", fmt.Sprintf("--port=%d", srv.Port))
	} else {
		args = append(args, "--socket="+socketPath(srv.SocketDir))
	}
	cmd.Args = append(cmd.Args, args...)
	var stderr bytes.Buffer
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(&stderr, out)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, ran := err.(*exec.ExitError); as != "" && !ran {
			return fmt.Errorf("%s: the client could not start%s", shown, as)
		}
		return clientError(shown, file, stderr.String(), err)
	}
	return nil
}

var clientErrRe = regexp.MustCompile(`^ERROR ([0-9]+) \(([0-9A-Z]+)\) at line ([0-9]+)(?: in file: '[^']*')?: (.*)$`)

// clientError makes one line of the client's error: file, line, message,
// and the statement that starts at that line.
func clientError(rel, path, stderr string, runErr error) error {
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		m := clientErrRe.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		line, _ := strconv.Atoi(m[3])
		msg := fmt.Sprintf("%s:%d: ERROR %s (%s): %s", rel, line, m[1], m[2], m[4])
		if stmt := statementAt(path, line); stmt != "" {
			msg += " (statement: " + stmt + ")"
		}
		return fmt.Errorf("%s", msg)
	}
	return fmt.Errorf("%s: client failed (%v): %s", rel, runErr, textutil.OneLine(engine.Tail(stderr, 3), " ", 300))
}

// statementAt returns the statement starting at a 1-based line, up to
// its semicolon, squeezed to one short line.
func statementAt(path string, line int) string {
	f, _, err := engine.OpenInput(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	var b strings.Builder
	for n := 1; sc.Scan(); n++ {
		if n < line {
			continue
		}
		b.WriteString(sc.Text())
		b.WriteByte(' ')
		if strings.Contains(sc.Text(), ";") || b.Len() > 400 {
			break
		}
	}
	s := b.String()
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i+1]
	}
	return textutil.OneLine(s, " ", 200)
}
