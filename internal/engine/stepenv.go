package engine

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
)

// A recipe's run step (`python manage.py migrate`, `npx prisma migrate`,
// `bundle exec rails db:migrate`) needs the environment of the person who
// asked for the build: their virtualenv, node_modules, Ruby and Java set
// up per shell (nvm, rbenv, sdkman, asdf, direnv). A daemon started from
// another shell, or by another project's test run, has none of it. So
// clients send their environment with the request, and the step runs in
// it; the daemon's own environment (its credentials, tokens) never
// reaches a step of someone who sent theirs.

// StepEnv is the environment a client sent for the steps of its build.
type StepEnv struct {
	Vars map[string]string
	From string // who sent it, for errors ("the client that asked, uid 1000")
}

type stepEnvKey struct{}

// WithStepEnv makes RunCommand run steps in env (the caller's), not in
// this process's environment. A nil env changes nothing.
func WithStepEnv(ctx context.Context, env map[string]string, from string) context.Context {
	if env == nil {
		return ctx
	}
	return context.WithValue(ctx, stepEnvKey{}, &StepEnv{Vars: env, From: from})
}

func stepEnvFrom(ctx context.Context) *StepEnv {
	se, _ := ctx.Value(stepEnvKey{}).(*StepEnv)
	return se
}

// stepEnvNames are passed from a client's environment to every run step:
// what finds programs and the language environments they run in. A
// recipe adds more with `env = ["NAME", ...]`.
var stepEnvNames = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
	"VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE",
	"NODE_PATH", "NODE_OPTIONS", "NVM_DIR", "NVM_BIN", "NPM_CONFIG_PREFIX",
	"JAVA_HOME", "MAVEN_HOME", "M2_HOME", "GRADLE_HOME", "GRADLE_USER_HOME", "SDKMAN_DIR",
	"GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE", "BUNDLE_PATH", "RBENV_ROOT", "RBENV_VERSION", "RUBYLIB",
	"PERL5LIB", "PERL_LOCAL_LIB_ROOT", "GOPATH", "GOROOT", "GOFLAGS", "GOMODCACHE", "CARGO_HOME", "RUSTUP_HOME",
	"ASDF_DIR", "ASDF_DATA_DIR",
}

// list is the part of a client's environment its steps get: the names
// above, LC_*, and what the recipe names.
func (se *StepEnv) list(extra []string) []string {
	want := map[string]bool{}
	for _, n := range stepEnvNames {
		want[n] = true
	}
	for _, n := range extra {
		want[n] = true
	}
	var out []string
	for k, v := range se.Vars {
		if want[k] || strings.HasPrefix(k, "LC_") {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// stepEnv is the environment a run step starts from and a phrase that
// says whose it is (for errors).
func stepEnv(ctx context.Context, b Build) ([]string, string) {
	if se := stepEnvFrom(ctx); se != nil {
		return se.list(b.Env), "the environment of " + se.From
	}
	return os.Environ(), "the environment dbfork was started in"
}

// envHint says, for a failed step, whose environment it ran in and what
// it found programs by: a "command not found" or an ImportError is most
// often a step run without the caller's virtualenv or node_modules.
func envHint(env []string, whose string) string {
	var path, venv string
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "PATH="):
			path = kv[5:]
		case strings.HasPrefix(kv, "VIRTUAL_ENV="):
			venv = kv
		}
	}
	if len(path) > 160 {
		path = path[:160] + "…"
	}
	h := fmt.Sprintf("it ran in %s: PATH=%s", whose, path)
	if venv != "" {
		h += ", " + venv
	}
	return h
}
