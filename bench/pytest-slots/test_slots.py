"""A suite as a user writes it: 1,000 tests, each with fresh data by
dbfork_fresh, each checking its database holds no row of another test.
Run by bench/pytest-slots/run.sh, which counts the modes the tests got."""
import os
import time
import uuid

import psycopg
import pytest


@pytest.mark.parametrize("i", range(int(os.environ.get("SLOTS_TESTS", "1000"))))
def test_isolated(dbfork_fresh, i):
    with open(os.environ["SLOTS_LOG"], "a") as f:
        f.write(f"{time.time():.3f} {os.environ.get('PYTEST_XDIST_WORKER')} {i} {dbfork_fresh.mode} {dbfork_fresh.database}\n")
    tag = f"{os.getpid()}-{i}-{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dbfork_fresh.dsn, autocommit=True) as c:
        c.execute("create table if not exists probe(tag text)")
        n = c.execute("select count(*) from probe").fetchone()[0]
        assert n == 0, f"{n} foreign rows in {dbfork_fresh.database}"
        c.execute("insert into probe values (%s)", (tag,))
