import os
import re
import textwrap

import pytest

from test_plugin import run_pytest

FRESH_INNER = textwrap.dedent('''\
    import os
    import psycopg
    import pytest

    @pytest.mark.parametrize("n", range(6))
    def test_fresh(dbfork_fresh, n):
        me = "test-%d" % n
        assert os.environ["DATABASE_URL"] == dbfork_fresh.dsn
        assert dbfork_fresh.mode == os.environ["WANT_MODE"]
        with psycopg.connect(dbfork_fresh.dsn, autocommit=True) as c:
            rows = [r[0] for r in c.execute("select who from notes order by id")]
            # The golden's rows only: nothing of the tests before.
            assert rows == ["golden"], rows
            c.execute("insert into notes(who) values (%s)", (me,))
            c.execute("create table t_%d(a int)" % n)
''')


def run_fresh(world, tmp_path, mode, *args, env_extra=None):
    suite = os.path.join(world.root, "suite")
    os.makedirs(suite, exist_ok=True)
    with open(os.path.join(suite, "test_fresh_inner.py"), "w") as f:
        f.write(FRESH_INNER)
    # The daemon's idle time must outlast xdist workers starting on a busy
    # machine (the controller finds the daemon before they exist).
    env = dict(env_extra or {}, WANT_MODE=mode, DBFORK_DAEMON_IDLE="15s")
    return run_pytest(world, tmp_path, "test_fresh_inner.py", *args, env_extra=env)


def test_fresh_by_reset(world, tmp_path):
    # PostgreSQL 15: no in-server clones; each test gets the instance reset.
    r = run_fresh(world, tmp_path, "reset", "-p", "no:xdist")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 passed" in r.stdout, r.stdout
    assert re.search(r"dbfork: 6 test\(s\) got fresh data by resetting the instance in place \(fresh = reset\)", r.stdout), r.stdout
    world.wait_daemon_gone()
    assert world.instances() == []


def test_fresh_by_database(world, tmp_path):
    # PostgreSQL 18 on the store's own XFS image: a database per test,
    # cloned inside the server; two workers, each with its lease.
    with open(world.recipe) as f:
        recipe = f.read()
    with open(world.recipe, "w") as f:
        f.write('version = "18"\n' + recipe)
    r = run_fresh(world, tmp_path, "database", "-n", "2",
                  env_extra={"DBFORK_ENGINE_CACHE": "/var/cache/dbfork-ci/engines", "DBFORK_STORE_FS": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 passed" in r.stdout, r.stdout
    assert "dbfork: 6 test(s) got fresh data by a database cloned inside the server" in r.stdout, r.stdout
    world.wait_daemon_gone()
    assert world.instances() == []


def test_fresh_by_slot(world, tmp_path):
    # A golden built with slots: each test gets the next slot of one lease.
    with open(world.recipe, "a") as f:
        f.write("\n[fresh]\nslots = 8\n")
    r = run_fresh(world, tmp_path, "slot", "-p", "no:xdist")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "6 passed" in r.stdout, r.stdout
    assert re.search(r"dbfork: 6 test\(s\) got fresh data by a slot built into the golden \(fresh = slot\)", r.stdout), r.stdout
    world.wait_daemon_gone()
    assert world.instances() == []


STALE_INNER = textwrap.dedent('''\
    import os
    import psycopg
    import pytest

    _pool = None  # the app's module-level connection, made on first use from DATABASE_URL

    def app_conn():
        global _pool
        if _pool is None:
            _pool = psycopg.connect(os.environ["DATABASE_URL"], autocommit=True)
        return _pool

    @pytest.mark.parametrize("n", range(3))
    def test_stale(dbfork_fresh, n):
        c = app_conn()
        rows = [r[0] for r in c.execute("select who from notes order by id")]
        assert rows == ["golden"], rows
        c.execute("insert into notes(who) values (%s)", ("test-%d" % n,))

    @pytest.fixture
    def app_db(dbfork_fresh):
        """The README's pattern: the app's connection made per test from the fresh DSN."""
        with psycopg.connect(dbfork_fresh.dsn, autocommit=True) as c:
            yield c

    @pytest.mark.parametrize("n", range(3))
    def test_followed(app_db, n):
        rows = [r[0] for r in app_db.execute("select who from notes order by id")]
        assert rows == ["golden"], rows
        app_db.execute("insert into notes(who) values (%s)", ("test-%d" % n,))
''')


@pytest.mark.parametrize("mode", ["reset", "slot", "database"])
def test_module_level_connection_never_quietly_stale(world, tmp_path, mode):
    """A connection the app keeps across tests fails loudly in every mode
    (reset breaks it; a used slot is closed) rather than passing with an
    earlier test's rows; one made per test from the fresh DSN passes."""
    env = {"DBFORK_DAEMON_IDLE": "15s"}
    if mode == "slot":
        with open(world.recipe, "a") as f:
            f.write("\n[fresh]\nslots = 8\n")
    if mode == "database":  # PostgreSQL 18 on the store's own XFS image
        with open(world.recipe) as f:
            recipe = f.read()
        with open(world.recipe, "w") as f:
            f.write('version = "18"\n' + recipe)
        env.update(DBFORK_ENGINE_CACHE="/var/cache/dbfork-ci/engines", DBFORK_STORE_FS="")
    suite = os.path.join(world.root, "suite")
    os.makedirs(suite, exist_ok=True)
    with open(os.path.join(suite, "test_stale_inner.py"), "w") as f:
        f.write(STALE_INNER)
    r = run_pytest(world, tmp_path, "test_stale_inner.py", "-p", "no:xdist", env_extra=env)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "2 failed, 4 passed" in out, out
    assert "FAILED test_stale_inner.py::test_stale[1]" in out and "FAILED test_stale_inner.py::test_stale[2]" in out, out
    world.wait_daemon_gone()
    assert world.instances() == []
