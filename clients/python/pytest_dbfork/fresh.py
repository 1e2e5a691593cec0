"""The `dbfork_fresh` fixture: the golden's data for every test, by the
fastest way the lease offers (docs/api.md, "A fresh database per test").

Each pytest process (each xdist worker) holds one lease for these tests.
Before each test the daemon decides how its data is made fresh (POST
/v1/leases/{id}/fresh): the next unused slot of a golden built with
[fresh] slots ("slot"), a database cloned inside the running server
("database", PostgreSQL 18 on a store that shares extents, dropped after
the test), or the lease reset in place ("reset": same DSN; the first test
of an untouched lease needs none).
"""

import os

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
    d.release(st.lease)
    st.lease = None


@pytest.fixture
def dbfork_fresh(request, monkeypatch, _dbfork_fresh_lease):
    """The golden's data for this test alone, by the fastest mode the lease
    offers (.mode says which). DATABASE_URL and the engine's variables are
    set for the test."""
    d = request.config._dbfork
    st = _state(request.config)
    lease = _dbfork_fresh_lease
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
    yield f
    if f.mode == "database":
        try:
            d.client.drop_database(lease.id, f.database)
        except (DbforkError, OSError):
            pass  # the lease ended: its databases went with it


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
