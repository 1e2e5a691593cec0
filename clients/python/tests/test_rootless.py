"""Issue 18 as its reporter checks it: an ordinary user with no sudo, no
store configured and a home on ext4 runs `pytest -n 4`. The plugin starts
that user's own daemon on the default store in their home, clones are
OverlayFS mounts inside each server's own user namespace, every test gets
its own database, and once the run is over nothing is left: no daemon, no
server, no mount in any namespace."""
import json
import os
import pwd
import shutil
import subprocess
import time

from test_plugin import INNER, PKG, records

USER = pwd.getpwnam("nobody")


def mounts_in_any_namespace(path):
    """Mount points under path seen from any process's mount namespace."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/mountinfo" % pid) as f:
                for line in f:
                    point = line.split()[4]
                    if point == path or point.startswith(path + "/"):
                        found.add(point)
        except OSError:
            pass
    return sorted(found)


def processes_under(uid, path):
    """PIDs of uid's processes whose program, working dir or command line
    lies under path (other suites may run as the same user meanwhile)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat("/proc/" + pid).st_uid != uid:
                continue
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                where = [f.read().decode(errors="replace")]
            for link in ("exe", "cwd"):
                try:
                    where.append(os.readlink("/proc/%s/%s" % (pid, link)))
                except OSError:
                    pass
            if any(path in w for w in where):
                out.append(int(pid))
        except OSError:
            pass
    return out


def chown_tree(path):
    for d, dirs, files in os.walk(path):
        for n in [d] + [os.path.join(d, x) for x in dirs + files]:
            os.lchown(n, USER.pw_uid, USER.pw_gid)


def test_rootless_xdist(world, tmp_path):
    home = os.path.join(world.root, "home")
    # What the user has: their own copy of dbfork on PATH, the plugin on
    # PYTHONPATH, Debian's pytest/xdist/psycopg and PostgreSQL. No root step.
    os.makedirs(os.path.join(home, "bin"))
    shutil.copy(world.bin, os.path.join(home, "bin", "dbfork"))
    shutil.copytree(os.path.join(PKG, "pytest_dbfork"), os.path.join(home, "py", "pytest_dbfork"))
    shutil.copytree(world.proj, os.path.join(home, "proj"))
    os.makedirs(os.path.join(home, "suite"))
    os.makedirs(os.path.join(home, "out"))
    with open(os.path.join(home, "suite", "test_inner.py"), "w") as f:
        f.write(INNER)
    with open(os.path.join(home, "suite", "pytest.ini"), "w") as f:
        f.write("[pytest]\ndbfork_recipe = ../proj/dbfork.toml\n")  # no store: the user's default
    chown_tree(home)
    env = {"PATH": os.path.join(home, "bin") + ":/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
           "PYTHONPATH": os.path.join(home, "py"), "DBFORK_TEST_OUT": os.path.join(home, "out"),
           "DBFORK_DAEMON_IDLE": "2s"}
    store = os.path.join(home, ".local", "share", "dbfork")

    def as_user(*args, **kw):
        return subprocess.run(list(args), env=env, user=USER.pw_uid, group=USER.pw_gid, extra_groups=[],
                              capture_output=True, text=True, **kw)

    try:
        r = as_user("/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_dbfork.plugin",
                    "-n", "4", cwd=os.path.join(home, "suite"))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "20 passed" in r.stdout, r.stdout
        fresh = records(os.path.join(home, "out"), "fresh")
        assert len(fresh) == 16 and len({x["id"] for x in fresh}) == 16, fresh
        assert len({x["worker"] for x in fresh}) > 1, "xdist did not spread the tests"
        assert {x["socket"] for x in fresh} == {os.path.join(store, "dbfork.sock")}, fresh
        assert os.stat(store).st_uid == USER.pw_uid, "the store is the user's own"
        with open(os.path.join(store, "logs", "serve.log")) as f:
            log = f.read()
        assert log.count("listening on") == 1, log
        # Clones were OverlayFS in the servers' namespaces, not full copies.
        assert {x["backend"] for x in fresh} == {"userns-overlay"}, fresh

        # The daemon leaves by itself once idle, and takes its servers,
        # their namespaces and their mounts with it.
        deadline = time.time() + 120
        while processes_under(USER.pw_uid, home) or mounts_in_any_namespace(store):
            assert time.time() < deadline, "left: processes %r, mounts %r" % (
                processes_under(USER.pw_uid, home), mounts_in_any_namespace(store))
            time.sleep(0.2)
        ls = as_user(os.path.join(home, "bin", "dbfork"), "ls", "--json", cwd=home)
        assert ls.returncode == 0 and not json.loads(ls.stdout)["instances"], ls
    finally:
        as_user(os.path.join(home, "bin", "dbfork"), "daemon", "stop", cwd=home)
        as_user(os.path.join(home, "bin", "dbfork"), "gc", "--all", cwd=home)
