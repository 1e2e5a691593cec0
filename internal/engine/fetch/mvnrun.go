package fetch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/dbfork/dbfork/internal/errs"
)

var ansiRe = regexp.MustCompile("\x1b\\[[0-9;]*m")

func (m *Maven) run(ctx context.Context, w *worker, args ...string) (string, error) {
	env := w.env("MAVEN_BASEDIR=" + w.dir)
	argv := []string{m.Mvn, "-q", "-B", "-Dstyle.color=never", "-Dmaven.repo.local=" + m.repoOf(w)}
	if w.dropped() {
		// A uid with no home in the password database: Java would make
		// user.home "?". Root's own settings come along (giveSettings).
		gs, err := m.giveSettings(w)
		if err != nil {
			return "", err
		}
		argv = append(argv, gs...)
		env = append(env, "MAVEN_OPTS=-Duser.home="+w.dir+" -Djava.io.tmpdir="+w.dir)
	} else {
		// mvn (Java) takes its home from the password database, dbfork
		// from $HOME: where they differ (CI containers), mvn would read
		// another settings.xml and fill another local repository than the
		// one dbfork reads. So mvn is told both; not over a user.home the
		// user gave mvn already, and not a home with blanks (mvn splits
		// MAVEN_OPTS on them).
		opts := os.Getenv("MAVEN_OPTS")
		if home, err := os.UserHomeDir(); err == nil && !strings.Contains(opts, "-Duser.home=") && !strings.ContainsAny(home, " \t\n") {
			env = append(env, "MAVEN_OPTS="+strings.TrimSpace(opts+" -Duser.home="+home))
		}
	}
	cmd := w.command(ctx, env, append(argv, args...)...)
	out, err := cmd.CombinedOutput()
	text := ansiRe.ReplaceAllString(string(out), "")
	if err == nil {
		return text, nil
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if strings.Contains(text, "Could not find artifact") || strings.Contains(text, "could not be resolved") && strings.Contains(text, "not found") {
		return "", errs.NotFound("mvn found no %s", artifactOf(args))
	}
	return "", fmt.Errorf("mvn %s failed: %v: %s", strings.Join(args, " "), err, mvnErrors(text))
}

// giveSettings hands root's Maven settings to the worker: root's
// ~/.m2/settings.xml (from the password database, never $HOME: under
// `sudo -E` that is the caller's) becomes the worker's user settings,
// and Maven's global settings are copied too when the worker could not
// read them in place. It returns mvn's extra arguments.
func (m *Maven) giveSettings(w *worker) ([]string, error) {
	if _, err := w.giveFile(filepath.Join(rootHome(), ".m2", "settings.xml"), filepath.Join(w.dir, ".m2", "settings.xml")); err != nil {
		return nil, fmt.Errorf("root's maven settings: %w", err)
	}
	real, err := filepath.EvalSymlinks(m.Mvn)
	if err != nil {
		return nil, nil
	}
	global := filepath.Join(filepath.Dir(filepath.Dir(real)), "conf", "settings.xml")
	if othersCanRead(global) {
		return nil, nil
	}
	dst := filepath.Join(w.dir, ".m2", "global-settings.xml")
	if ok, err := w.giveFile(global, dst); err != nil || !ok {
		return nil, err
	}
	return []string{"-gs", dst}, nil
}

func artifactOf(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "-Dartifact=") {
			return strings.TrimPrefix(a, "-Dartifact=")
		}
	}
	return "artifact"
}

// mvnErrors keeps the first [ERROR] lines of mvn's output on one line.
func mvnErrors(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "[ERROR]"))
		if l != "" && len(keep) < 2 {
			keep = append(keep, l)
		}
	}
	s := strings.Join(keep, " ")
	if len(s) > 400 {
		s = s[:397] + "..."
	}
	return s
}
