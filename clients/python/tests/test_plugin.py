import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

from pytest_dbfork import Client

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)

INNER = textwrap.dedent('''\
    import json, os
    import psycopg
    import pytest

    OUT = os.environ["DBFORK_TEST_OUT"]

    def record(kind, **kw):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(OUT, "%s-%s-%d.json" % (kind, worker, os.getpid())), "a") as f:
            f.write(json.dumps(dict(kw, worker=worker, pid=os.getpid(), socket=os.environ.get("DBFORK_SOCKET"))) + "\\n")

    @pytest.mark.parametrize("n", range(16))
    def test_fresh_db(dbfork_db, n):
        me = "test-%d" % n
        assert os.environ["DATABASE_URL"] == dbfork_db.dsn
        with psycopg.connect(dbfork_db.dsn, autocommit=True) as c:
            c.execute("insert into notes(who) values (%s)", (me,))
            rows = [r[0] for r in c.execute("select who from notes order by id")]
        # Never anyone else's rows: only the golden's and this test's.
        assert rows == ["golden", me]
        record("fresh", id=dbfork_db.id, backend=dbfork_db.backend)

    @pytest.mark.parametrize("n", range(4))
    def test_session_db(dbfork_session, n):
        # One database per worker for the session: rows pile up within a
        # worker, never across workers.
        with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as c:
            c.execute("insert into notes(who) values (%s)", (os.environ.get("PYTEST_XDIST_WORKER", "main"),))
            whos = set(r[0] for r in c.execute("select who from notes where who <> 'golden'"))
        assert whos == {os.environ.get("PYTEST_XDIST_WORKER", "main")}
        record("session", id=dbfork_session.id)
''')


def plugin_args():
    """The installed entry point loads the plugin; from a bare checkout,
    load it by name."""
    eps = metadata.entry_points()
    group = eps.select(group="pytest11") if hasattr(eps, "select") else eps.get("pytest11", [])
    if any(ep.name == "dbfork" for ep in group):
        return []
    return ["-p", "pytest_dbfork.plugin"]


def run_pytest(world, tmp, *args, env_extra=None, store="../store"):
    suite = os.path.join(world.root, "suite")
    os.makedirs(suite, exist_ok=True)
    with open(os.path.join(suite, "test_inner.py"), "w") as f:
        f.write(INNER)
    with open(os.path.join(suite, "pytest.ini"), "w") as f:
        f.write("[pytest]\ndbfork_recipe = ../proj/dbfork.toml\ndbfork_store = %s\n" % store)
    env = dict(os.environ, DBFORK_TEST_OUT=str(tmp), PYTHONPATH=PKG, DBFORK_BIN=world.bin, DBFORK_DAEMON_IDLE="2s")
    env.pop("DBFORK_STORE", None)
    env.pop("DBFORK_SOCKET", None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(), *args],
                          cwd=suite, env=env, capture_output=True, text=True)


def records(tmp, kind):
    out = []
    for name in os.listdir(tmp):
        if name.startswith(kind + "-"):
            with open(os.path.join(tmp, name)) as f:
                out += [json.loads(line) for line in f]
    return out


def test_xdist_workers_get_isolated_databases(world, tmp_path):
    # No daemon yet: the first worker that needs one starts it (on the
    # store's own XFS image, as a new user's store would be), the others
    # use it, and it leaves by itself once the run is over.
    r = run_pytest(world, tmp_path, "-n", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "20 passed" in r.stdout, r.stdout
    fresh = records(tmp_path, "fresh")
    assert len(fresh) == 16
    # Every test had its own instance, never reused.
    assert len({x["id"] for x in fresh}) == 16
    assert len({x["worker"] for x in fresh}) > 1, "xdist did not spread the tests"
    # The controller found the daemon once and handed its socket to every
    # worker (a cold start is paid once per run, not per worker).
    assert {x["socket"] for x in fresh} == {os.path.join(world.store, "dbfork.sock")}, fresh
    session = records(tmp_path, "session")
    by_worker = {}
    for x in session:
        by_worker.setdefault(x["worker"], set()).add(x["id"])
    # One session database per worker, each different.
    assert all(len(ids) == 1 for ids in by_worker.values()), by_worker
    assert len({next(iter(ids)) for ids in by_worker.values()}) == len(by_worker)
    with open(os.path.join(world.store, "logs", "serve.log")) as f:
        log = f.read()
    assert log.count("listening on") == 1, log
    world.wait_daemon_gone()
    assert world.instances() == []
    assert world.servers() == []


def test_no_daemon_is_a_clear_failure(world, tmp_path):
    # A store dbfork refuses to use (others may write its parent): the
    # plugin fails with dbfork's own one-line reason.
    bad = os.path.join(world.root, "open")
    os.mkdir(bad)
    os.chmod(bad, 0o777)
    r = run_pytest(world, tmp_path, "-k", "test_fresh_db and 0]", store="../open/store")
    assert r.returncode != 0
    assert "writable by group or others" in r.stdout + r.stderr, r.stdout + r.stderr
    # No dbfork to start a daemon with.
    r = run_pytest(world, tmp_path, "-k", "test_fresh_db and 0]", env_extra={"DBFORK_BIN": "/nonexistent/dbfork"})
    assert r.returncode != 0
    assert "set DBFORK_BIN" in r.stdout + r.stderr, r.stdout + r.stderr


def test_client_errors_carry_kind(world):
    world.start_serve()
    c = Client(store=world.store)
    try:
        c.release("deadbeef")
    except Exception as e:
        assert getattr(e, "kind", None) == "not_found" and getattr(e, "status", 0) == 404, e
    else:
        raise AssertionError("release of an unknown lease succeeded")


PLAIN = textwrap.dedent('''\
    def test_plain():
        assert 1 + 1 == 2
''')


def _run_suite(world, suite, *args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=PKG, DBFORK_BIN=world.bin, DBFORK_DAEMON_IDLE="2s", DBFORK_STORE=world.store,
               DBFORK_STORE_FS="plain")
    for k in ("DBFORK_SOCKET", "DBFORK_RECIPE"):
        env.pop(k, None)
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(), *args],
                          cwd=suite, env=env, capture_output=True, text=True)


def test_plugin_is_opt_in_and_says_what_it_does(world, tmp_path):
    suite = os.path.join(world.root, "plain")
    os.makedirs(suite)
    with open(os.path.join(suite, "test_plain.py"), "w") as f:
        f.write(PLAIN)
    # No recipe anywhere: nothing of dbfork runs, not even with no binary.
    r = _run_suite(world, suite, env_extra={"DBFORK_BIN": "/nonexistent/dbfork"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dbfork" not in r.stdout + r.stderr, r.stdout + r.stderr
    # A recipe through DBFORK_RECIPE: one header line with recipe and key.
    r = _run_suite(world, suite, "-v", env_extra={"DBFORK_RECIPE": world.recipe})
    assert r.returncode == 0, r.stdout + r.stderr
    header = [l for l in r.stdout.splitlines() if l.startswith("dbfork: recipe ")]
    assert len(header) == 1 and world.recipe in header[0] and "-p no:dbfork" in header[0], r.stdout
    key = world.dbfork("build", "-f", world.recipe).stdout.strip()
    assert key[:12] in header[0], (key, header)
    # A recipe but no binary: one line at the start, no test run.
    r = _run_suite(world, suite, env_extra={"DBFORK_RECIPE": world.recipe, "DBFORK_BIN": "/nonexistent/dbfork"})
    assert r.returncode != 0
    out = r.stdout + r.stderr
    # pytest prints an exit reason twice (banner and summary): never per test.
    assert 1 <= out.count("set DBFORK_BIN") <= 2 and "1 passed" not in out, out


def test_failed_build_is_reported_once(world, tmp_path):
    proj = os.path.join(world.root, "broken")
    os.makedirs(proj)
    with open(os.path.join(proj, "dbfork.toml"), "w") as f:
        f.write('engine = "postgres"\n[[load]]\nsql = ["seed.sql"]\n')
    with open(os.path.join(proj, "seed.sql"), "w") as f:
        f.write("create table t(x int);\ninsert into nosuch values (1);\n")
    with open(os.path.join(proj, "test_many.py"), "w") as f:
        f.write("import pytest\n\n@pytest.mark.parametrize('n', range(5))\ndef test_db(dbfork_db, n):\n    pass\n")
    for extra in ([], ["-n", "2"]):
        r = _run_suite(world, proj, *extra)
        out = r.stdout + r.stderr
        assert r.returncode != 0, out
        # The build's error, at the start (pytest shows an exit reason in its
        # banner and summary), never once per test.
        assert 1 <= out.count('relation "nosuch" does not exist') <= 2, out
        assert "FAILED" not in out and "test_many.py::" not in out, out
