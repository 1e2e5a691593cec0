package postgres

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dbfork/dbfork/internal/engine"
	"github.com/dbfork/dbfork/internal/textutil"
)

// Load runs one recipe step against the build server: SQL files and plain
// dumps through psql (which handles COPY ... FROM stdin and meta-commands),
// custom/tar dumps through pg_restore, commands through sh with the PG*
// environment set.
func (p *Postgres) Load(ctx context.Context, srv *engine.Server, r engine.Build, st engine.Step, out engine.LogWriter) error {
	switch st.Kind {
	case engine.StepSQL:
		for i, f := range st.Files {
			if err := p.psqlFile(ctx, srv, r, f, st.ShownName(r, i), out); err != nil {
				return err
			}
		}
		return nil
	case engine.StepDump:
		f := st.Files[0]
		format, err := dumpFormat(f)
		if err != nil {
			return err
		}
		if format == "plain" {
			return p.psqlFile(ctx, srv, r, f, st.ShownName(r, 0), out)
		}
		return p.restore(ctx, srv, r, f, st.ShownName(r, 0), out)
	case engine.StepRun:
		return engine.RunCommand(ctx, r, st, p.Conn(srv).Env, out)
	}
	return fmt.Errorf("unknown step kind %q", st.Kind)
}

func (p *Postgres) clientEnv(srv *engine.Server) []string {
	env := os.Environ()
	for k, v := range p.Conn(srv).Env {
		env = append(env, k+"="+v)
	}
	return append(env, "PGAPPNAME=dbfork-build", "PGOPTIONS=-c client_min_messages=warning")
}

var psqlErrRe = regexp.MustCompile(`^psql:(.*):([0-9]+): (ERROR|FATAL|PANIC):\s+(.*)$`)

// psqlFile feeds file to psql on its standard input: the build opened
// it (a private copy of the bytes it hashed), psql never opens it by a
// path that could be swapped. shown names it in errors.
func (p *Postgres) psqlFile(ctx context.Context, srv *engine.Server, r engine.Build, file, shown string, out engine.LogWriter) error {
	in, _, err := engine.OpenInput(file)
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer in.Close()
	// Host, port, user, database and password come from the environment:
	// the socket dir for dbfork's own builds, 127.0.0.1 for a caller's.
	cmd := exec.CommandContext(ctx, p.bin("psql"), "-X", "-q", "-b", "-v", "ON_ERROR_STOP=1", "-f", "-")
	cmd.Dir = r.Dir
	cmd.Env = p.clientEnv(srv)
	cmd.Stdin = in
	as := engine.AsCaller(ctx, r, cmd)
	var stderr bytes.Buffer
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(&stderr, out)
	err = cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if as != "" && !isExit(err) {
		return fmt.Errorf("%s: psql could not start%s", shown, as)
	}
	if lost := lostAt(stderr.String()); lost > 0 {
		return serverLost(ctx, srv, shown, lost)
	}
	return sqlError(shown, stderr.String(), err)
}

var lostRe = regexp.MustCompile(`^psql:.*:([0-9]+): (?:error: )?(?:connection to server was lost|server closed the connection unexpectedly)`)

// lostAt is the input line psql was on when the server went away, 0 when
// it did not.
func lostAt(stderr string) int {
	for _, l := range strings.Split(stderr, "\n") {
		if m := lostRe.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return 0
}

// serverLost names why the build server went away mid-file (a PANIC on a
// full disk, a crash) from its own log: psql knows only that it did.
func serverLost(ctx context.Context, srv *engine.Server, shown string, line int) error {
	// The postmaster logs the crash of a backend as it happens; give it
	// a moment to get there.
	var why string
	for i := 0; i < 20 && ctx.Err() == nil; i++ {
		if why = crashLine(srv.LogFile); why != "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if why == "" {
		why = "see the server log " + srv.LogFile
	}
	return fmt.Errorf("%s:%d: the build server stopped: %s", shown, line, why)
}

var crashRe = regexp.MustCompile(`\b(PANIC|FATAL):\s+(.*)$`)

// crashLine is the last PANIC (else FATAL) message of a server log.
func crashLine(logFile string) string {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return ""
	}
	var panicMsg, fatal string
	for _, l := range strings.Split(string(data), "\n") {
		if m := crashRe.FindStringSubmatch(l); m != nil {
			if m[1] == "PANIC" {
				panicMsg = "PANIC: " + m[2]
			} else if !strings.Contains(m[2], "terminating connection") {
				fatal = "FATAL: " + m[2]
			}
		}
	}
	if panicMsg != "" {
		return textutil.OneLine(panicMsg, " ", 300)
	}
	return textutil.OneLine(fatal, " ", 300)
}

// sqlError turns psql's stderr into one line: file, line, message and the
// failing statement.
func sqlError(file, stderr string, runErr error) error {
	var msg, stmt string
	line, stmtLines := 0, 0
	sc := bufio.NewScanner(strings.NewReader(stderr))
	inStmt := false
	for sc.Scan() {
		l := sc.Text()
		if m := psqlErrRe.FindStringSubmatch(l); m != nil && msg == "" {
			line, _ = strconv.Atoi(m[2])
			msg = m[3] + ": " + m[4]
			continue
		}
		if i := strings.Index(l, ": STATEMENT:  "); i >= 0 && strings.HasPrefix(l, "psql:") && stmt == "" {
			stmt, inStmt, stmtLines = l[i+len(": STATEMENT:  "):], true, 1
			continue
		}
		if inStmt {
			if strings.HasPrefix(l, "psql:") {
				inStmt = false
			} else {
				stmt += " " + strings.TrimSpace(l)
				stmtLines++
			}
		}
	}
	if msg == "" {
		return fmt.Errorf("%s: psql failed (%v): %s", file, runErr, textutil.OneLine(engine.Tail(stderr, 3), " ", 300))
	}
	if stmt != "" {
		// psql names the line a statement ends on; name the one it starts on.
		return fmt.Errorf("%s:%d: %s (statement: %s)", file, line-stmtLines+1, msg, textutil.OneLine(stmt, " ", 200))
	}
	return fmt.Errorf("%s:%d: %s", file, line, msg)
}

// restore feeds a custom or tar archive to pg_restore on its standard
// input (seekable: it is the file itself, opened by the build).
func (p *Postgres) restore(ctx context.Context, srv *engine.Server, r engine.Build, file, shown string, out engine.LogWriter) error {
	in, _, err := engine.OpenInput(file)
	if err != nil {
		return fmt.Errorf("%s: %w", shown, err)
	}
	defer in.Close()
	if p.clientMajor >= 17 && serverMajor(p.version) < 17 {
		return p.restoreScript(ctx, srv, r, in, shown, out)
	}
	cmd := exec.CommandContext(ctx, p.bin("pg_restore"), "--exit-on-error", "--no-owner", "--no-privileges",
		"-d", srv.Database)
	cmd.Dir = r.Dir
	cmd.Env = p.clientEnv(srv)
	cmd.Stdin = in
	as := engine.AsCaller(ctx, r, cmd)
	var stderr bytes.Buffer
	cmd.Stdout = out
	cmd.Stderr = io.MultiWriter(&stderr, out)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if as != "" && !isExit(err) {
			return fmt.Errorf("%s: pg_restore could not start%s", shown, as)
		}
		return fmt.Errorf("%s: pg_restore failed (%v): %s", shown, err, textutil.OneLine(engine.Tail(stderr.String(), 4), " ", 400))
	}
	return nil
}

// dumpFormat tells a pg_dump custom or tar archive from a plain SQL dump.
func dumpFormat(path string) (string, error) {
	f, _, err := engine.OpenInput(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("PGDMP")):
		return "custom", nil
	case n >= 262 && string(head[257:262]) == "ustar":
		return "tar", nil
	}
	return "plain", nil
}

// restoreScript restores through SQL: pg_restore 17 and later start with
// SET transaction_timeout, which older servers reject, so for them the
// archive is turned into a script without that line and fed to psql.
func (p *Postgres) restoreScript(ctx context.Context, srv *engine.Server, r engine.Build, in *os.File, shown string, out engine.LogWriter) error {
	gen := exec.CommandContext(ctx, p.bin("pg_restore"), "--no-owner", "--no-privileges", "-f", "-")
	gen.Dir = r.Dir
	gen.Stdin = in
	engine.AsCaller(ctx, r, gen)
	var genErr bytes.Buffer
	gen.Stderr = &genErr
	script, err := gen.StdoutPipe()
	if err != nil {
		return err
	}
	run := exec.CommandContext(ctx, p.bin("psql"), "-X", "-q", "-b", "-v", "ON_ERROR_STOP=1", "-f", "-")
	run.Dir = r.Dir
	run.Env = p.clientEnv(srv)
	engine.AsCaller(ctx, r, run)
	stdin, err := run.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	run.Stdout = out
	run.Stderr = io.MultiWriter(&stderr, out)
	if err := gen.Start(); err != nil {
		return err
	}
	if err := run.Start(); err != nil {
		_ = gen.Process.Kill()
		_ = gen.Wait()
		return err
	}
	br := bufio.NewReaderSize(script, 1<<16)
	var copyErr error
	for {
		line, err := br.ReadString('\n')
		if line != "" && line != "SET transaction_timeout = 0;\n" {
			if _, werr := io.WriteString(stdin, line); werr != nil {
				copyErr = werr
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				copyErr = err
			}
			break
		}
	}
	stdin.Close()
	_, _ = io.Copy(io.Discard, script)
	genWait, runWait := gen.Wait(), run.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if runWait != nil {
		return sqlError(shown, stderr.String(), runWait)
	}
	if genWait != nil || copyErr != nil {
		return fmt.Errorf("%s: pg_restore failed (%v): %s", shown, errors.Join(genWait, copyErr), textutil.OneLine(engine.Tail(genErr.String(), 4), " ", 400))
	}
	return nil
}

// isExit tells a tool that ran and failed from one that never started
// (a dir the caller cannot enter, a binary they cannot run).
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}
