"""pytest plugin: each xdist worker (or the single pytest process) gets a
session database, and each test that asks for `dbfork_db` gets a fresh one.

Databases come from the store's `dbfork serve`, started on demand by the
first worker that needs one (`dbfork daemon start`; it leaves when idle);
leases end when the test (or the worker) ends, and the daemon reclaims them
if the worker dies. Configure with --dbfork-recipe / `dbfork_recipe` in the ini file.

Opt-in: the plugin does anything only when a recipe is given (option, ini,
DBFORK_RECIPE) or a dbfork.toml lies in the directory pytest runs in. It then
says so in one header line (recipe, golden key, what it overrides in
pytest-django); without one it leaves pytest-django alone. `-p no:dbfork`
turns it off whatever is configured.
"""

import os

import pytest

from .client import Client, DbforkError, find_socket


def pytest_addoption(parser):
    group = parser.getgroup("dbfork", "fresh pre-seeded databases from dbfork")
    group.addoption("--dbfork-recipe", dest="dbfork_recipe", default=None,
                    help="dbfork.toml to clone databases from (ini: dbfork_recipe)")
    group.addoption("--dbfork-store", dest="dbfork_store", default=None,
                    help="dbfork store whose `dbfork serve` to use (ini: dbfork_store; default $DBFORK_STORE or dbfork's default)")
    group.addoption("--dbfork-backend", dest="dbfork_backend", default=None,
                    help="clone backend, as `dbfork up --backend` takes it (ini: dbfork_backend; default $DBFORK_BACKEND, else the server's auto)")
    parser.addini("dbfork_recipe", "dbfork.toml to clone databases from (relative to the ini file)")
    parser.addini("dbfork_store", "dbfork store whose `dbfork serve` to use")
    parser.addini("dbfork_backend", "clone backend")


def _setting(config, name, env=None):
    v = config.getoption(name)
    if v:
        return v, str(config.invocation_params.dir)
    v = config.getini(name)
    if v:
        return v, str(config.rootpath if config.inipath is None else config.inipath.parent)
    if env and os.environ.get(env):
        return os.environ[env], str(config.invocation_params.dir)
    return None, None


class _Dbfork:
    def __init__(self, config):
        self.config = config
        recipe, base = _setting(config, "dbfork_recipe", "DBFORK_RECIPE")
        default = os.path.join(str(config.invocation_params.dir), "dbfork.toml")
        self.recipe = os.path.join(base, recipe) if recipe else default
        # Active only when asked for: a recipe named, or one found here.
        self.active = bool(recipe) or os.path.isfile(default)
        self.golden = None  # the golden's key, once checked
        self.error = None   # the session's one failure (no binary, failed build)
        store, sbase = _setting(config, "dbfork_store")
        self.store = os.path.join(sbase, store) if store else None
        backend, _ = _setting(config, "dbfork_backend", "DBFORK_BACKEND")
        self.backend = backend or None
        self.client = None  # found on first use: DBFORK_SOCKET or `dbfork daemon start`
        workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
        self.workers = int(workers) if workers and workers.isdigit() else 1

    def acquire(self):
        if self.error:
            pytest.fail("dbfork: no database (%s)" % self.error, pytrace=False)
        if not self.active:
            pytest.fail("dbfork: no recipe: pass --dbfork-recipe, set dbfork_recipe in the ini file or DBFORK_RECIPE, "
                        "or add a dbfork.toml where pytest runs", pytrace=False)
        if not os.path.isfile(self.recipe):
            pytest.fail("dbfork: recipe %s not found: pass --dbfork-recipe or set dbfork_recipe in the ini file" % self.recipe,
                        pytrace=False)
        try:
            if self.client is None:
                self.client = Client(socket_path=find_socket(self.store))
            return self.client.acquire(self.recipe, backend=self.backend)
        except DbforkError as e:
            pytest.fail("dbfork: %s" % e, pytrace=False)

    def release(self, lease, failed=False):
        """Ends the lease; a failed test's is kept instead with
        DBFORK_KEEP_FAILED (docs/api.md, "The client contract")."""
        try:
            if failed and keep_failed():
                kept = self.client.keep(lease.id)
                self.config.get_terminal_writer().line(
                    "dbfork: kept instance %s of a failed test: %s (dbfork down %s when done)" % (kept.id, lease.dsn, kept.id))
                return
            self.client.release(lease.id)
        except (DbforkError, OSError):
            pass  # already reclaimed, or the daemon went away: nothing to leak


def keep_failed():
    """DBFORK_KEEP_FAILED set to anything but the empty string (as dbforktest)."""
    return os.environ.get("DBFORK_KEEP_FAILED", "") != ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Remembers whether the test failed, for keep-failed at teardown."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        item._dbfork_failed = True


def _failed(request):
    return getattr(request.node, "_dbfork_failed", False)


def pytest_configure(config):
    config.addinivalue_line("markers", "dbfork: the test uses a dbfork database")
    config._dbfork = _Dbfork(config)
    from . import fresh
    config.pluginmanager.register(fresh, "dbfork-fresh")
    if not config._dbfork.active:
        return  # no recipe: pytest-django and everything else as without us
    if config.pluginmanager.hasplugin("django"):
        # Registered after pytest-django, so this django_db_setup wins.
        from . import djangodb
        config.pluginmanager.register(djangodb, "dbfork-django")
    _prepare_for_workers(config)


def _check_once(config):
    """In the controller (or the only process): find or start the daemon
    and build or find the golden, once. Raises DbforkError: a missing
    binary or a failed build is the run's one error, said at its start,
    rather than the same message for every test."""
    d = config._dbfork
    if hasattr(config, "workerinput") or d.golden:
        return
    if d.error:
        raise DbforkError(d.error)
    if not os.path.isfile(d.recipe):
        d.error = "recipe %s not found: pass --dbfork-recipe or set dbfork_recipe in the ini file" % d.recipe
        raise DbforkError(d.error)
    try:
        if config.pluginmanager.hasplugin("django"):
            _check_django_engine(d)
        if d.client is None:
            d.client = Client(socket_path=find_socket(d.store))
        g = d.client.ensure_golden(d.recipe) or {}
        d.golden = g.get("key") or "?"
    except DbforkError as e:
        d.error = str(e)
        raise


def _check_django_engine(d):
    """With pytest-django: a recipe of another engine than DATABASES is
    refused before any golden is built."""
    try:
        from django.conf import settings
        aliases = list(getattr(settings, "DBFORK_ALIASES", ["default"]))
    except Exception:  # Django not configured: pytest-django says so itself
        return
    from .django import check_engine
    check_engine(d.recipe, aliases)


_OFF = " (pytest runs without dbfork with -p no:dbfork)"


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    config = session.config
    d = getattr(config, "_dbfork", None)
    if d is None or not d.active or hasattr(config, "workerinput"):
        return
    try:
        _check_once(config)
    except DbforkError as e:
        pytest.exit("dbfork: %s%s" % (e, _OFF), returncode=4)


def pytest_report_header(config):
    d = getattr(config, "_dbfork", None)
    if d is None or not d.active or hasattr(config, "workerinput") or not d.golden:
        return None
    line = "dbfork: recipe %s, golden %s" % (d.recipe, d.golden[:12])
    if config.pluginmanager.hasplugin("django"):
        line += "; replaces pytest-django's test database set-up (--create-db, --reuse-db, migrations)"
    return line + "; -p no:dbfork turns it off"


def _prepare_for_workers(config):
    """In the xdist controller: find (or start) the daemon once, check the
    golden once, and hand the socket to every worker through
    DBFORK_SOCKET, so a cold start is paid once per run, not per worker.
    Any failure is left to the workers, which report it with the test that
    needed a database."""
    if hasattr(config, "workerinput") or os.environ.get("DBFORK_SOCKET"):
        return
    n = getattr(config.option, "numprocesses", None)
    if not n or getattr(config.option, "dist", "no") == "no":
        return
    d = config._dbfork
    if not os.path.isfile(d.recipe):
        return
    try:
        sock = find_socket(d.store)
        d.client = Client(socket_path=sock)
        _check_once(config)
    except (OSError, ValueError):
        return
    except DbforkError as e:
        d.error = str(e)
        raise pytest.UsageError("dbfork: %s%s" % (e, _OFF))
    os.environ["DBFORK_SOCKET"] = sock
    config._dbfork_keep_alive = d.client.keep_alive()


def pytest_unconfigure(config):
    stop = getattr(config, "_dbfork_keep_alive", None)
    if stop:
        stop()


@pytest.fixture(scope="session")
def dbfork_session(request):
    """A database for this pytest process (one per xdist worker), for the
    whole session. DATABASE_URL and the engine's variables (PG*, MYSQL_*)
    are exported into os.environ while it lasts."""
    d = request.config._dbfork
    lease = d.acquire()
    saved = {k: os.environ.get(k) for k in lease.env}
    os.environ.update(lease.env)
    yield lease
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    d.release(lease, failed=request.session.testsfailed > 0)


@pytest.fixture
def dbfork_db(request, monkeypatch):
    """A fresh database for this test alone, thrown away after it. Its
    environment (DATABASE_URL, PG*/MYSQL_*) is set for the test."""
    d = request.config._dbfork
    lease = d.acquire()
    for k, v in lease.env.items():
        monkeypatch.setenv(k, v)
    yield lease
    d.release(lease, failed=_failed(request))


@pytest.fixture
def dbfork_dsn(dbfork_db):
    """The DSN of a fresh database for this test."""
    return dbfork_db.dsn
