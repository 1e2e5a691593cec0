"""The `dbfork_fresh` fixture: the golden's data for every test, by the
fastest way the lease offers (docs/api.md, "A fresh database per test").

Each pytest process (each xdist worker) holds one lease for these tests.
Before each test the daemon decides how its data is made fresh (POST
/v1/leases/{id}/fresh): the next unused slot of a golden built with
[fresh] slots ("slot"), a database cloned inside the running server
("database", PostgreSQL 18 on a store that shares extents, dropped after
the test), or the lease reset in place ("reset": same DSN; the first test
of an untouched lease needs none).

With pytest-django, the Django aliases the plugin leases (DBFORK_ALIASES)
point at the test's fresh database for the test, and back after it: the
old connection is closed, so the next ORM query opens one there, and the
test may use the database without the django_db mark. Code that opened
its own connection or pool before the call (a module-level pool built
from DATABASE_URL) does not follow: build it per test from `.dsn` (see
the README, "Connection pools").
"""

import os
from types import SimpleNamespace

import pytest

from .client import DbforkError


class Fresh:
    """What a test gets: where its data is and how it was made fresh."""

    def __init__(self, lease, mode, dsn, env, database):
        self.lease = lease
        self.mode = mode          # "slot", "database" or "reset"
        self.dsn = dsn
        self.env = env
        self.database = database  # the fresh database's name (modes "slot", "database")

    def __repr__(self):
        return "<dbfork fresh %s %s>" % (self.mode, self.dsn)


class _State:
    def __init__(self):
        self.lease = None
        self.counts = {}    # mode -> tests


def _state(config):
    if not hasattr(config, "_dbfork_fresh"):
        config._dbfork_fresh = _State()
    return config._dbfork_fresh


@pytest.fixture(scope="session")
def _dbfork_fresh_lease(request):
    d = request.config._dbfork
    st = _state(request.config)
    st.lease = d.acquire()
    yield st.lease
    d.release(st.lease, failed=request.session.testsfailed > 0)
    st.lease = None


@pytest.fixture
def dbfork_fresh(request, monkeypatch, _dbfork_fresh_lease):
    """The golden's data for this test alone, by the fastest mode the lease
    offers (.mode says which). DATABASE_URL and the engine's variables are
    set for the test."""
    d = request.config._dbfork
    st = _state(request.config)
    lease = _dbfork_fresh_lease
    django = _django_for(request)
    try:
        fd = d.client.fresh(lease.id)
        if fd.mode == "none":  # untouched: the lease's own database, as the golden has it
            f = Fresh(lease, "reset", fd.dsn, fd.env, None)
        else:
            f = Fresh(lease, fd.mode, fd.dsn, fd.env, fd.name if fd.mode in ("slot", "database") else None)
    except DbforkError as e:
        pytest.fail("dbfork: %s" % e, pytrace=False)
    st.counts[f.mode] = st.counts.get(f.mode, 0) + 1
    for k, v in f.env.items():
        monkeypatch.setenv(k, v)
    if django is None:
        yield f
    else:
        yield from _with_django(django, f)
    if f.mode == "database":
        try:
            d.client.drop_database(lease.id, f.database)
        except (DbforkError, OSError):
            pass  # the lease ended: its databases went with it


_DB_FIXTURES = ("db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback")


def _django_for(request):
    """pytest-django's blocker and the aliases to re-point, or None when
    pytest-django is not in this run (or dbfork does not lease for it)."""
    if not request.config.pluginmanager.hasplugin("dbfork-django"):
        return None
    from pytest_django.lazy_django import django_settings_is_configured
    if not django_settings_is_configured():
        return None  # pytest-django installed, but no Django project in this run
    # The mark's transaction (or flush) was set up before this fixture on
    # the session lease's database and is undone after it: its rows and
    # ours would mix. Refused rather than left to go wrong quietly.
    if request.node.get_closest_marker("django_db") or any(n in request.fixturenames for n in _DB_FIXTURES):
        pytest.fail("dbfork: dbfork_fresh gives the test its own database and lets it reach it: drop "
                    "@pytest.mark.django_db (and the db/transactional_db fixtures) from %s" % request.node.name,
                    pytrace=False)
    request.getfixturevalue("django_db_setup")
    from django.conf import settings
    return SimpleNamespace(blocker=request.getfixturevalue("django_db_blocker"),
                           aliases=list(getattr(settings, "DBFORK_ALIASES", ["default"])))


def _with_django(dj, f):
    """Points Django's aliases at f for the test (closing the connections
    they had), then back at the session's lease."""
    from .django import point_aliases, restore_aliases
    saved = point_aliases(SimpleNamespace(engine=f.lease.engine, dsn=f.dsn), dj.aliases)
    try:
        with dj.blocker.unblock():
            yield f
    finally:
        restore_aliases(saved)


_MODES = {"slot": "a slot built into the golden",
          "database": "a database cloned inside the server (PostgreSQL 18)",
          "reset": "resetting the instance in place"}


def pytest_terminal_summary(terminalreporter, config):
    st = getattr(config, "_dbfork_fresh", None)
    if not st or not st.counts:
        return
    for mode, n in sorted(st.counts.items()):
        terminalreporter.write_line("dbfork: %d test(s) got fresh data by %s (fresh = %s)" % (n, _MODES.get(mode, mode), mode))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist: a worker's counts come back through its workeroutput."""
    out = getattr(node, "workeroutput", {}) or {}
    counts = out.get("dbfork_fresh")
    if counts:
        st = _state(node.config)
        for mode, n in counts.items():
            st.counts[mode] = st.counts.get(mode, 0) + n


def pytest_sessionfinish(session):
    wo = getattr(session.config, "workeroutput", None)
    st = getattr(session.config, "_dbfork_fresh", None)
    if wo is not None and st is not None:
        wo["dbfork_fresh"] = dict(st.counts)
