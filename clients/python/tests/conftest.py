import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def dbfork_bin():
    b = os.environ.get("DBFORK_BIN") or os.path.join(REPO, "bin", "dbfork")
    if not os.path.exists(b):
        subprocess.run(["go", "build", "-o", b, "./cmd/dbfork"], cwd=REPO, check=True)
    return b


class World:
    """A temp store with a PostgreSQL recipe and a real `dbfork serve`."""

    def __init__(self, root):
        self.root = root
        self.store = os.path.join(root, "store")
        self.proj = os.path.join(root, "proj")
        self.bin = dbfork_bin()
        os.makedirs(self.proj)
        self.recipe = os.path.join(self.proj, "dbfork.toml")
        with open(self.recipe, "w") as f:
            f.write(textwrap.dedent("""\
                engine = "postgres"
                database = "app"
                [[load]]
                sql = ["seed.sql"]
                [pool]
                min = 4
                max = 8
            """))
        with open(os.path.join(self.proj, "seed.sql"), "w") as f:
            f.write("create table notes(id serial primary key, who text not null);\n"
                    "insert into notes(who) values ('golden');\n")
        self.serve = None

    def dbfork(self, *args, check=True):
        # Plain: a command that merely looks at a store the test never made
        # must not make it an XFS image.
        env = dict(os.environ, DBFORK_STORE_FS="plain")
        return subprocess.run([self.bin, "--store", self.store, *args], capture_output=True, text=True, check=check, env=env)

    def start_serve(self):
        self.serve = subprocess.Popen([self.bin, "--store", self.store, "serve", "-f", self.recipe],
                                      stderr=subprocess.PIPE, text=True, env=dict(os.environ, DBFORK_STORE_FS="plain"))
        line = self.serve.stderr.readline()
        assert "listening on" in line, line

    def stop_serve(self):
        if self.serve and self.serve.poll() is None:
            self.serve.send_signal(signal.SIGTERM)
            self.serve.wait(timeout=120)
        self.serve = None

    def wait_daemon_gone(self, timeout=120):
        """Waits for the store's on-demand daemon to leave by itself, with
        every server it ran."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not self.servers():
                return
            time.sleep(0.2)
        raise AssertionError("the idle daemon did not leave")

    def servers(self):
        """PIDs of processes whose command line names this world's store."""
        out = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    if self.store.encode() in f.read():
                        out.append(int(pid))
            except OSError:
                pass
        return out

    def instances(self):
        return json.loads(self.dbfork("ls", "--json").stdout)["instances"] or []


@pytest.fixture
def world():
    if os.geteuid() != 0:
        pytest.skip("needs root: dbfork mounts overlays and runs servers as its system user (CI runs as root)")
    root = tempfile.mkdtemp(prefix="dbfork-pytest-")
    os.chmod(root, 0o755)
    w = World(root)
    yield w
    w.stop_serve()
    w.dbfork("gc", "--all", check=False)
    left = w.instances()
    # The store's own XFS image (test_fresh) or the nosuid bind a plain store
    # root is opened as: root is no mount point, so umount -R root misses them.
    w.dbfork("store", "umount", check=False)
    subprocess.run(["umount", "-R", root], capture_output=True)  # only if a failure left something
    shutil.rmtree(root, ignore_errors=True)
    assert not left, "instances left: %r" % left


# The Django project is run by test_django.py in its own processes.
collect_ignore = ["django_project"]
