#!/usr/bin/env python3
"""Print, every INTERVAL ms, each thread of process PID that is blocked in
the kernel (state D), with its kernel stack: what a stalled server waits
on. Stops when the process exits or on SIGINT/SIGTERM.
    bench/dstate-sample.py PID OUT [INTERVAL_MS]
Lines: monotonic ms, tid, thread name, wchan, stack (innermost first)."""
import os
import signal
import sys
import time

pid, out = int(sys.argv[1]), sys.argv[2]
interval = float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.01
stop = False


def halt(*_):
    global stop
    stop = True


signal.signal(signal.SIGINT, halt)
signal.signal(signal.SIGTERM, halt)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


with open(out, "w") as w:
    while not stop:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            break
        now = time.monotonic() * 1000
        for tid in tids:
            stat = read(f"/proc/{pid}/task/{tid}/stat")
            # the state follows the parenthesised name, which may hold spaces
            rp = stat.rfind(")")
            if rp < 0 or stat[rp + 2:rp + 3] != "D":
                continue
            comm = stat[stat.find("(") + 1:rp]
            wchan = read(f"/proc/{pid}/task/{tid}/wchan")
            frames = [ln.split()[1].split("+")[0] for ln in read(f"/proc/{pid}/task/{tid}/stack").splitlines() if " " in ln]
            w.write(f"{now:.1f} {tid} {comm} {wchan} {'<'.join(frames[:14])}\n")
        w.flush()
        time.sleep(interval)
