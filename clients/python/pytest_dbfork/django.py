"""Django: every test process runs against its own dbfork lease instead of
a test database Django creates, migrates and clones.

- `manage.py test --parallel N` with TEST_RUNNER =
  "pytest_dbfork.django.DbforkRunner": the main process finds the daemon
  once and makes sure the golden exists; each worker process of
  Django's pool acquires its own lease over the socket (the daemon ends it
  when the worker exits) instead of Django's template or mysqldump clones.
- pytest-django: the pytest plugin overrides `django_db_setup`, so each
  xdist worker's DATABASES["default"] is its own lease (see dbfork_django_setup).

The golden must hold the migrated schema (and seed data): for example a
recipe step `run = "python manage.py migrate"` with settings that read
DATABASE_URL. Settings: DBFORK_RECIPE (default $DBFORK_RECIPE or
./dbfork.toml), DBFORK_STORE, DBFORK_BACKEND, DBFORK_ALIASES (default
["default"]); other aliases get Django's own test databases.
"""

import os
import sys
from urllib.parse import unquote, urlsplit

from .client import Client, DbforkError, find_socket

_ENGINES = {"postgres": ("postgresql",), "mariadb": ("mysql",), "mysql": ("mysql",)}


def settings_for(lease, settings_dict):
    """The Django connection settings of a lease: its DSN's host, port,
    user, password and database in place of the configured ones."""
    ours = _ENGINES.get(lease.engine, ())
    backend = settings_dict.get("ENGINE", "").rsplit(".", 1)[-1]
    if ours and backend not in ours:
        raise DbforkError("dbfork: the recipe's engine is %s but DATABASES uses %s: point DBFORK_RECIPE at a "
                          "recipe of the same engine" % (lease.engine, settings_dict.get("ENGINE")), "invalid")
    u = urlsplit(lease.dsn)
    return {"HOST": u.hostname or "", "PORT": str(u.port or ""), "USER": unquote(u.username or ""),
            "PASSWORD": unquote(u.password or ""), "NAME": u.path.lstrip("/")}


def recipe_engine(recipe):
    """The engine a recipe names, read from the file itself (no daemon, no
    build), or None when it cannot be told."""
    try:
        import tomllib
        with open(recipe, "rb") as f:
            return tomllib.load(f).get("engine")
    except Exception:  # no tomllib (Python < 3.11) or a recipe dbfork will refuse with its own words
        return None


def check_engine(recipe, aliases):
    """Refuses, before any golden is built, a recipe whose engine is not
    the one the aliases' DATABASES entries use: one line, at once, rather
    than a golden built for nothing."""
    from django.db import connections
    engine = recipe_engine(recipe)
    ours = _ENGINES.get(engine or "", ())
    if not ours:
        return
    for alias in aliases:
        configured = connections[alias].settings_dict.get("ENGINE", "")
        if configured.rsplit(".", 1)[-1] not in ours:
            raise DbforkError("dbfork: the recipe %s is for %s but DATABASES[%r] uses %s: point DBFORK_RECIPE at a "
                              "recipe of the same engine" % (recipe, engine, alias, configured), "invalid")


def _config():
    from django.conf import settings
    recipe = getattr(settings, "DBFORK_RECIPE", None) or os.environ.get("DBFORK_RECIPE") or "dbfork.toml"
    recipe = os.path.abspath(recipe)
    if not os.path.isfile(recipe):
        raise DbforkError("dbfork: recipe %s not found: set DBFORK_RECIPE in settings or the environment" % recipe,
                          "not_found")
    return (recipe, getattr(settings, "DBFORK_STORE", None), getattr(settings, "DBFORK_BACKEND", None)
            or os.environ.get("DBFORK_BACKEND"), list(getattr(settings, "DBFORK_ALIASES", ["default"])))


class Leased:
    """This process's lease, pointed at by the dbfork aliases."""

    def __init__(self, client, lease, saved):
        self.client = client
        self.lease = lease
        self.saved = saved  # alias -> the settings it had

    def end(self, failed=False):
        """Releases the lease; with DBFORK_KEEP_FAILED and failed, keeps it
        (docs/api.md, "The client contract")."""
        restore_aliases(self.saved)
        try:
            if failed and os.environ.get("DBFORK_KEEP_FAILED", "") != "":
                self.client.keep(self.lease.id)
                print("dbfork: kept instance %s of a failed run: %s (dbfork down %s when done)"
                      % (self.lease.id, self.lease.dsn, self.lease.id), file=sys.stderr)
                return
            self.client.release(self.lease.id)
        except (DbforkError, OSError):
            pass  # reclaimed already, or the daemon went away: nothing to leak


def point_aliases(lease, aliases):
    """Points the aliases' connections at the lease (in place, so threads
    see it too); returns what they had, for restore_aliases."""
    from django.db import connections
    saved = {}
    for alias in aliases:
        conn = connections[alias]
        new = settings_for(lease, conn.settings_dict)
        saved[alias] = {k: conn.settings_dict.get(k) for k in new}
        conn.close()
        conn.settings_dict.update(new)
    return saved


def restore_aliases(saved):
    from django.db import connections
    for alias, old in saved.items():
        connections[alias].close()
        connections[alias].settings_dict.update(old)


def lease_for_process(aliases=None):
    """Acquires a lease from this process (the daemon ends it when the
    process exits) and points the aliases' connections at it. The socket
    is $DBFORK_SOCKET (handed down by the main process) or found by the
    rule of docs/api.md."""
    recipe, store, backend, default_aliases = _config()
    client = Client(socket_path=find_socket(store))
    lease = client.acquire(recipe, backend=backend)
    try:
        saved = point_aliases(lease, aliases or default_aliases)
    except DbforkError:
        client.release(lease.id)
        raise
    os.environ.update(lease.env)
    return Leased(client, lease, saved)


def prepare_run():
    """In the main process: find the daemon once, make sure the golden
    exists, and hand the socket to the workers through DBFORK_SOCKET.
    Returns the function that stops keeping the daemon awake."""
    recipe, store, backend, aliases = _config()
    check_engine(recipe, aliases)
    sock = find_socket(store)
    c = Client(socket_path=sock)
    c.ensure_golden(recipe)
    os.environ["DBFORK_SOCKET"] = sock
    os.environ["DBFORK_RECIPE"] = recipe
    if backend:
        os.environ["DBFORK_BACKEND"] = backend
    return c.keep_alive()


# Django's own runner ------------------------------------------------------

_leased = None   # this worker process's lease
_failure = None  # why this worker has none (raised with its first tests)


def _init_worker(counter, initial_settings=None, serialized_contents=None, process_setup=None,
                 process_setup_args=None, debug_mode=None, used_aliases=None):
    """Django's ParallelTestSuite worker initializer (same arguments), with
    the dbfork aliases pointed at a lease of this worker process's own
    rather than at Django's clone number N. Other aliases get Django's."""
    global _leased, _failure
    import multiprocessing

    import django
    from django.db import connections
    from django.test import runner as djrunner
    from django.test.utils import setup_test_environment

    with counter.get_lock():
        counter.value += 1
        djrunner._worker_id = counter.value
    spawn = multiprocessing.get_start_method() == "spawn"
    if spawn:
        if process_setup and callable(process_setup):
            process_setup(*(process_setup_args or ()))
        django.setup()
        setup_test_environment(debug=debug_mode)
    ours = _config()[3]
    used = list(used_aliases) if used_aliases is not None else list(connections)
    for alias in used:
        if alias in ours:
            continue
        conn = connections[alias]
        if spawn:
            conn.settings_dict.update(initial_settings[alias])
            if serialized_contents and serialized_contents.get(alias):
                conn._test_serialized_contents = serialized_contents[alias]
        conn.creation.setup_worker_connection(djrunner._worker_id)
    mine = [a for a in ours if a in used]
    if mine:
        # An initializer that raises makes the pool start workers forever:
        # the error goes with the worker's first tests instead.
        try:
            _leased = lease_for_process(mine)
        except (DbforkError, OSError) as e:
            _failure = str(e)


def _run_subsuite(args):
    if _failure:
        raise DbforkError(_failure)
    from django.test.runner import _run_subsuite as run
    return run(args)


def _runner_classes():
    from django.db import connections
    from django.test.runner import DiscoverRunner, ParallelTestSuite

    class DbforkParallelTestSuite(ParallelTestSuite):
        init_worker = _init_worker
        run_subsuite = _run_subsuite

        def run(self, result):
            # Forked workers must not share (and close) the parent's
            # connections: they connect to their own leases.
            connections.close_all()
            return super().run(result)

    class DbforkRunner(DiscoverRunner):
        """TEST_RUNNER = "pytest_dbfork.django.DbforkRunner": the dbfork
        aliases (DBFORK_ALIASES, default ["default"]) come from leases, one
        per process, instead of test databases Django creates and clones."""

        parallel_test_suite = DbforkParallelTestSuite

        def setup_databases(self, **kwargs):
            self._dbfork_stop = prepare_run()
            ours = _config()[3]
            aliases = kwargs.get("aliases")
            aliases = list(aliases) if aliases is not None else list(connections)
            rest = [a for a in aliases if a not in ours]
            old = super().setup_databases(**dict(kwargs, aliases=rest))
            # The main process too: serial runs and the system checks.
            mine = [a for a in ours if a in aliases]
            return old, (lease_for_process(mine) if mine else None)

        def run_suite(self, suite, **kwargs):
            result = super().run_suite(suite, **kwargs)
            self._dbfork_failed = not result.wasSuccessful()
            return result

        def teardown_databases(self, old_config, **kwargs):
            old, leased = old_config
            if leased is not None:
                # The main process's lease (serial runs); a worker's ends with it.
                leased.end(failed=getattr(self, "_dbfork_failed", False))
            self._dbfork_stop()
            super().teardown_databases(old, **kwargs)

    return DbforkParallelTestSuite, DbforkRunner


DbforkParallelTestSuite, DbforkRunner = _runner_classes()
