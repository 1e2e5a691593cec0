"""A small client for the API of `dbfork serve` (HTTP/JSON on a unix socket).

Standard library only. See docs/api.md in the dbfork repository.
"""

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Dict, Optional

# The API version this client speaks; /v1/health says the daemon's (its
# "api"), and a client refuses a daemon of another version up front.
API_VERSION = 1


class DbforkError(Exception):
    """An error answered by the daemon; kind is invalid, not_found, busy, ..."""

    def __init__(self, message, kind="internal", status=0):
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass
class Lease:
    id: str
    dsn: str
    env: Dict[str, str] = field(default_factory=dict)
    golden: str = ""
    engine: str = ""
    backend: str = ""
    acquire_ms: float = 0.0
    # "database": create_database hands out databases cloned inside the
    # server; "reset": reset puts the whole instance back (docs/api.md).
    fresh: str = "reset"
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d):
        return cls(id=d["id"], dsn=d["dsn"], env=dict(d.get("env") or {}), golden=d.get("golden", ""),
                   engine=d.get("engine", ""), backend=d.get("backend", ""),
                   acquire_ms=float(d.get("acquire_ms", 0.0)), fresh=d.get("fresh") or "reset", raw=d)


@dataclass
class Database:
    """A fresh database inside a leased server (Lease.fresh == "database")."""
    name: str
    dsn: str
    env: Dict[str, str] = field(default_factory=dict)
    ms: float = 0.0

    @classmethod
    def from_json(cls, d):
        return cls(name=d["name"], dsn=d["dsn"], env=dict(d.get("env") or {}), ms=float(d.get("ms", 0.0)))


@dataclass
class FreshDB:
    """The answer of the one server-side fresh call: the database the
    next test uses and how the daemon made it fresh ("slot", "database",
    "reset" or "none": the lease was untouched)."""
    mode: str
    name: str
    dsn: str
    env: Dict[str, str] = field(default_factory=dict)
    conn: dict = field(default_factory=dict)
    ms: float = 0.0

    @classmethod
    def from_json(cls, d):
        return cls(mode=d["mode"], name=d["name"], dsn=d["dsn"], env=dict(d.get("env") or {}),
                   conn=dict(d.get("conn") or {}), ms=float(d.get("ms", 0.0)))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("dbfork", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


class Client:
    """Talks to the `dbfork serve` of a store. The daemon learns this
    process's PID from the socket, so leases end when this process does."""

    def __init__(self, store=None, socket_path=None, timeout=1800.0):
        # Without a socket: the one rule of docs/api.md (which store is
        # the default is dbfork's to say, not this client's).
        self.socket_path = socket_path or find_socket(store)
        self.timeout = timeout
        self._api_checked = False

    def available(self):
        """True when a daemon answers on the socket."""
        if not os.path.exists(self.socket_path):
            return False
        try:
            self.health()
            return True
        except (OSError, DbforkError):
            return False

    def check_api(self):
        """Raises DbforkError (kind "conflict") unless the daemon speaks
        API_VERSION: a daemon left running by another dbfork install would
        otherwise misread requests in the middle of a test run."""
        h = self._call("GET", "/v1/health")
        if h.get("api") != API_VERSION:
            raise DbforkError(
                "dbfork: the daemon on %s speaks API version %s (dbfork %s) but pytest-dbfork speaks %d: "
                "stop it with `dbfork daemon stop` and run again (or install the dbfork that matches)"
                % (self.socket_path, h.get("api", 0), h.get("version") or "unknown", API_VERSION), "conflict", 409)
        self._api_checked = True
        return h

    def _call(self, method, path, body=None):
        if not self._api_checked and not path.startswith("/v1/health"):
            self.check_api()
        conn = _UnixConnection(self.socket_path, self.timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if data is not None else {}
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        if resp.status >= 300:
            try:
                err = json.loads(raw)
                raise DbforkError(err.get("error", raw.decode(errors="replace")), err.get("kind", "internal"), resp.status)
            except ValueError:
                raise DbforkError("HTTP %d: %s" % (resp.status, raw.decode(errors="replace")), "internal", resp.status)
        return json.loads(raw) if raw else None

    def health(self):
        return self._call("GET", "/v1/health")

    def ensure_golden(self, recipe):
        # The environment goes along: a build's run steps run in it (the
        # virtualenv that has Django), not in the daemon's (docs/api.md).
        return self._call("POST", "/v1/goldens", {"recipe": os.path.abspath(recipe), "env": dict(os.environ)})

    def acquire(self, recipe, backend=None, min=None, max=None, ttl_seconds=None, wait_seconds=None, pid=None) -> Lease:
        req = {"recipe": os.path.abspath(recipe), "env": dict(os.environ)}
        for k, v in (("backend", backend), ("min", min), ("max", max), ("ttl_seconds", ttl_seconds),
                     ("wait_seconds", wait_seconds), ("pid", pid)):
            if v is not None:
                req[k] = v
        return Lease.from_json(self._call("POST", "/v1/leases", req))

    def release(self, lease_id):
        self._call("DELETE", "/v1/leases/" + lease_id)

    def keep(self, lease_id) -> Lease:
        return Lease.from_json(self._call("POST", "/v1/leases/%s/keep" % lease_id))

    def reset(self, lease_id) -> Lease:
        """Takes a lease back to the golden state in place: same DSN, open
        connections broken."""
        return Lease.from_json(self._call("POST", "/v1/leases/%s/reset" % lease_id, {}))

    def create_database(self, lease_id) -> Database:
        """A fresh database inside the lease's server (kind "unsupported"
        unless the lease's fresh is "database")."""
        return Database.from_json(self._call("POST", "/v1/leases/%s/databases" % lease_id, {}))

    def fresh(self, lease_id) -> FreshDB:
        """Fresh data for the lease's next test, the way the daemon finds
        cheapest (a slot, a database cloned in the server, a reset in
        place, or nothing); the previous fresh database is retired."""
        return FreshDB.from_json(self._call("POST", "/v1/leases/%s/fresh" % lease_id, {}))

    def drop_database(self, lease_id, name):
        self._call("DELETE", "/v1/leases/%s/databases/%s" % (lease_id, name))

    def keep_alive(self, every=1.0):
        """Touches the daemon every `every` seconds from a background
        thread, so a daemon started on demand does not leave while a test
        runner is still starting its workers (a touch counts as a call).
        Returns the function that stops it."""
        stop = threading.Event()

        def loop():
            while not stop.wait(every):
                try:
                    self._call("GET", "/v1/health?touch=1")
                except (OSError, DbforkError, ValueError):
                    pass
        threading.Thread(target=loop, name="dbfork-keep-alive", daemon=True).start()
        return stop.set

    def leases(self):
        return self._call("GET", "/v1/leases")["leases"]

    def pools(self):
        return self._call("GET", "/v1/pools")["pools"]


def find_binary():
    """The dbfork binary: $DBFORK_BIN, else the one this package carries
    (the platform wheels and a build from the sdist put it in
    pytest_dbfork/bin/), else dbfork on PATH. None when there is none."""
    if os.environ.get("DBFORK_BIN"):
        return os.environ["DBFORK_BIN"]
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "dbfork")
    if os.access(bundled, os.X_OK):
        return bundled
    return shutil.which("dbfork")


def find_socket(store=None):
    """The API socket, by the one rule of docs/api.md ("Finding the
    daemon"): $DBFORK_SOCKET as it is, else whatever `dbfork daemon start`
    says, which starts a daemon for the store when none answers (it leaves
    by itself when idle). Raises DbforkError with dbfork's one-line reason."""
    if os.environ.get("DBFORK_SOCKET"):
        return os.environ["DBFORK_SOCKET"]
    binary = find_binary()
    if not binary:
        raise DbforkError("dbfork is not on PATH and this pytest-dbfork carries none (an install from source "
                          "without its binary): install the wheel for this platform, or set DBFORK_BIN to "
                          "dbfork (or DBFORK_SOCKET to a running daemon's socket)", "missing_tool")
    args = [binary] + (["--store", store] if store else []) + ["daemon", "start", "--json"]
    try:
        p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as e:
        raise DbforkError("cannot run %s: %s (set DBFORK_BIN to the dbfork binary)" % (binary, e), "missing_tool")
    if p.returncode != 0:
        lines = [l for l in p.stderr.splitlines() if l.strip()]
        raise DbforkError(lines[-1] if lines else "dbfork daemon start failed (exit %d)" % p.returncode, "unavailable")
    return json.loads(p.stdout)["socket"]
