#!/usr/bin/env python3
"""A fresh database per test through the Python client, as a test suite
would ask for it: WORKERS processes, each with one lease, each cycle one
fresh call, one connection, one INSERT and one SELECT that must see no
row but its own. Counts isolation violations (a row of another cycle in
the database handed out: a slot served twice, or a database not fresh)
and slots served twice (the same slot of the same server handed out again
before that server was reset or the lease moved), and how often each mode
was answered; prints the fresh call's p50/p99. A worker that fails ends
the run with its error and a non-zero exit.

    DBFORK_BIN=bin/dbfork bench/fresh-python.py --store S --recipe DIR/dbfork.toml \\
        --workers 8 --cycles 200 [--backend reflink]

Needs psycopg (3) and the pytest_dbfork package (clients/python) on the
path; the golden needs a table dbfork_bench(tag varchar) (the bench
datasets of `dbfork bench` have it).
"""
import argparse
import multiprocessing as mp
import os
import queue
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from pytest_dbfork.client import Client  # noqa: E402


def worker(args, n, out):
    try:
        out.put(("ok", cycles(args, n)))
    except BaseException as e:  # the parent reports it and stops the others
        out.put(("error", "worker %d: %s: %s" % (n, type(e).__name__, e)))


def cycles(args, n):
    import psycopg
    c = Client(store=args.store)
    # max bounds the leases; each lease's next instance comes from the
    # pool's ahead share (default: max), past it.
    lease = c.acquire(args.recipe, backend=args.backend, min=args.workers, max=args.workers)
    lat, modes, bad, twice = [], {}, 0, 0
    server, served = None, set()  # slots handed out by the lease's current server since its last reset
    try:
        for i in range(args.cycles):
            t = time.perf_counter()
            fd = c.fresh(lease.id)
            lat.append((time.perf_counter() - t) * 1000)
            modes[fd.mode] = modes.get(fd.mode, 0) + 1
            at = (fd.conn.get("host"), fd.conn.get("port"))
            if at != server or fd.mode == "reset":
                server, served = at, set()
            if fd.mode == "slot":
                if fd.name in served:
                    twice += 1
                served.add(fd.name)
            tag = "w%d-%d" % (n, i)
            with psycopg.connect(fd.dsn, autocommit=True) as db:
                db.execute("INSERT INTO dbfork_bench (tag) VALUES (%s)", (tag,))
                others = db.execute("SELECT count(*) FROM dbfork_bench WHERE tag <> %s", (tag,)).fetchone()[0]
            if others:
                bad += 1
    finally:
        c.release(lease.id)
    return lat, modes, bad, twice


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--store")
    p.add_argument("--recipe", required=True)
    p.add_argument("--backend")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--cycles", type=int, default=200)
    args = p.parse_args()
    out = mp.Queue()
    t0 = time.perf_counter()
    procs = [mp.Process(target=worker, args=(args, n, out)) for n in range(args.workers)]
    for pr in procs:
        pr.start()
    results = []
    while len(results) < len(procs):
        try:
            kind, r = out.get(timeout=1)
        except queue.Empty:
            dead = [pr.exitcode for pr in procs if pr.exitcode not in (None, 0)]
            if not dead:
                continue
            kind, r = "error", "a worker died (exit %s) without a result" % dead[0]
        if kind == "error":
            for pr in procs:
                pr.terminate()
            sys.exit("fresh-python: " + r)
        results.append(r)
    for pr in procs:
        pr.join()
    secs = time.perf_counter() - t0
    lat = sorted(x for r in results for x in r[0])
    modes = {}
    for r in results:
        for k, v in r[1].items():
            modes[k] = modes.get(k, 0) + v
    bad = sum(r[2] for r in results)
    twice = sum(r[3] for r in results)
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
    print("workers %d cycles %d: %d fresh calls in %.1f s (with leasing), fresh p50 %.1f ms p99 %.1f ms max %.1f ms; "
          "modes %s; isolation violations %d; slots served twice %d" % (
              args.workers, args.cycles, len(lat), secs, q(0.5), q(0.99), lat[-1], modes, bad, twice))
    failed = [pr.exitcode for pr in procs if pr.exitcode]
    sys.exit(1 if bad or twice or failed else 0)


if __name__ == "__main__":
    main()
