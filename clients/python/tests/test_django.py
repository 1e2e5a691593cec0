"""Django with dbfork: `manage.py test --parallel 4` with the DbforkRunner
and `pytest -n 4` with pytest-django, against PostgreSQL and MariaDB.
Every worker process runs against its own lease holding the golden's
migrated schema and seed row; Django creates, migrates and clones no test
database; no lease is left after the run."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from pytest_dbfork import Client
from pytest_dbfork.client import find_socket
from test_plugin import plugin_args

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)

if os.environ.get("CI"):
    import django  # noqa: F401  CI installs Django, pytest-django, PyMySQL (scripts/lib.sh)
    import pytest_django  # noqa: F401
else:
    pytest.importorskip("django")
    pytest.importorskip("pytest_django")

ENGINES = {"postgres": "postgres", "mariadb": "mysql"}


def project(world, engine):
    """A copy of the Django project with a recipe whose golden is the
    project migrated by its own manage.py, plus a seed row."""
    d = os.path.join(world.root, "django-" + engine)
    if not os.path.isdir(d):
        shutil.copytree(os.path.join(HERE, "django_project"), d)
        with open(os.path.join(d, "seed.sql"), "w") as f:
            f.write("INSERT INTO notes_note(who) VALUES ('golden');\n")
        with open(os.path.join(d, "dbfork.toml"), "w") as f:
            f.write(textwrap.dedent("""\
                engine = "%s"
                database = "app"
                [[load]]
                run = "%s manage.py migrate --noinput"
                inputs = ["manage.py", "mysite/settings.py", "notes/models.py", "notes/migrations/0001_initial.py"]
                [[load]]
                sql = ["seed.sql"]
                [pool]
                min = 4
                max = 8
            """ % (engine, sys.executable)))
    return d


def env_for(world, engine, out, **extra):
    env = dict(os.environ, DBFORK_STORE=world.store, DBFORK_STORE_FS="plain", DBFORK_DAEMON_IDLE="2s",
               DBFORK_BIN=world.bin, DBFORK_TEST_OUT=str(out), DJANGO_TEST_ENGINE=ENGINES[engine],
               PYTHONPATH=PKG, **extra)
    for k in ("DBFORK_SOCKET", "DBFORK_RECIPE", "DATABASE_URL", "DJANGO_SETTINGS_MODULE"):
        env.pop(k, None)
    env.update(extra)
    return env


def records(out):
    rows = []
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            rows += [json.loads(line) for line in f]
    return rows


def check_isolated(world, recs, n):
    assert len(recs) == n, recs
    for r in recs:
        assert r["others"] == [], r
        assert r["rows"][0] == "golden", r
        # The recipe's database itself: no test_app, no test_app_1 clone.
        assert r["db"] == "app", r
    ports = {}
    for r in recs:
        ports.setdefault(r["pid"], set()).add(r["port"])
    assert len(ports) >= 2, "the tests did not spread over workers: %r" % ports
    assert all(len(p) == 1 for p in ports.values()), ports
    # No two worker processes shared a server.
    assert len({next(iter(p)) for p in ports.values()}) == len(ports), ports
    sock = find_socket_for(world)
    c = Client(socket_path=sock)
    deadline = time.time() + 20
    while c.leases() and time.time() < deadline:
        time.sleep(0.2)
    assert c.leases() == []
    world.wait_daemon_gone()


def find_socket_for(world):
    saved = dict(os.environ)
    try:
        os.environ.update(DBFORK_STORE=world.store, DBFORK_STORE_FS="plain", DBFORK_DAEMON_IDLE="2s")
        os.environ.pop("DBFORK_SOCKET", None)
        os.environ["DBFORK_BIN"] = world.bin
        return find_socket()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_manage_py_test_parallel(world, tmp_path, engine):
    d = project(world, engine)
    env = env_for(world, engine, tmp_path, DBFORK_RECIPE=os.path.join(d, "dbfork.toml"))
    r = subprocess.run([sys.executable, "manage.py", "test", "--parallel", "4", "-v", "2", "notes"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "Ran 8 tests" in out and "OK" in out, out
    for phrase in ("Creating test database", "Cloning test database"):
        assert phrase not in out, out
    check_isolated(world, records(tmp_path), 8)


@pytest.mark.parametrize("engine", ["postgres", "mariadb"])
def test_pytest_django_xdist(world, tmp_path, engine):
    d = project(world, engine)
    env = env_for(world, engine, tmp_path, DJANGO_SETTINGS_MODULE="mysite.settings")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                        "-n", "4", "--dbfork-recipe", "dbfork.toml", "test_pytest_django.py"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "9 passed" in out, out
    check_isolated(world, records(tmp_path), 8)


def test_readme_shows_the_runner_and_recipe():
    with open(os.path.join(PKG, "README.md")) as f:
        readme = f.read()
    with open(os.path.join(HERE, "django_project", "mysite", "settings.py")) as f:
        settings = f.read()
    line = 'TEST_RUNNER = "pytest_dbfork.django.DbforkRunner"'
    assert line in readme and line in settings
    assert 'run = "python manage.py migrate --noinput"' in readme
    assert 'inputs = ["manage.py", "mysite/settings.py", "notes/models.py", "notes/migrations/0001_initial.py"]' in readme


def test_engine_mismatch_refused_before_any_build(world, tmp_path):
    # A MariaDB recipe for a project whose DATABASES use PostgreSQL: one
    # line at once, and no golden built for nothing.
    d = project(world, "mariadb")
    env = env_for(world, "postgres", tmp_path, DBFORK_RECIPE=os.path.join(d, "dbfork.toml"))
    r = subprocess.run([sys.executable, "manage.py", "test", "notes"], cwd=d, env=env, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "is for mariadb but DATABASES['default'] uses django.db.backends.postgresql" in out, out
    env = env_for(world, "postgres", tmp_path, DJANGO_SETTINGS_MODULE="mysite.settings")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                        "--dbfork-recipe", "dbfork.toml", "test_pytest_django.py"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "is for mariadb but DATABASES['default']" in out, out
    assert json.loads(world.dbfork("ls", "--json").stdout)["goldens"] in ([], None), "a golden was built"


def test_pytest_django_fresh(world, tmp_path):
    """dbfork_fresh under pytest-django: Django's connection is re-pointed
    at each test's fresh database and back; a django_db mark, whose
    transaction is already open on the session's database, is refused
    in one line."""
    d = project(world, "postgres")
    env = env_for(world, "postgres", tmp_path, DJANGO_SETTINGS_MODULE="mysite.settings")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin_args(),
                        "--dbfork-recipe", "dbfork.toml", "test_fresh_django.py"],
                       cwd=d, env=env, capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert "4 passed, 1 error" in out, out
    assert "drop @pytest.mark.django_db" in out, out
    c = Client(socket_path=find_socket_for(world))
    deadline = time.time() + 20
    while c.leases() and time.time() < deadline:
        time.sleep(0.2)
    world.wait_daemon_gone()
