#!/bin/bash
# bench/pytest-slots/run.sh STORE RECIPE WORKERS [BIN]
#
# Runs test_slots.py with pytest-xdist (-n WORKERS) against RECIPE (a
# golden with [fresh] slots, its pool at the recipe's own [pool] sizes),
# with the daemon stopped before and after, and prints the modes the
# tests got and the set-up (fixture) times pytest reports (10 ms steps).
# Needs pytest, pytest-xdist, psycopg and pytest-dbfork in the Python on
# PATH (pip install pytest pytest-xdist "psycopg[binary]" ./clients/python).
set -eu
store=$1 recipe=$(realpath "$2") workers=$3 bin=${4:-dbfork}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/test_slots.py" "$work/"
"$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
t0=$(date +%s.%N)
(cd "$work" && SLOTS_LOG="$work/modes.log" DBFORK_BIN="$bin" python3 -m pytest -q -n "$workers" -p no:randomly \
	--dbfork-store "$store" --dbfork-recipe "$recipe" --durations=0 --durations-min=0 >"$work/out.txt" 2>&1) || true
t1=$(date +%s.%N)
"$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
python3 - "$work" "$t0" "$t1" <<'PY'
import re, sys
work, t0, t1 = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
out = open(work + "/out.txt").read()
xs = sorted(float(m.group(1)) * 1000 for m in re.finditer(r"^([0-9.]+)s setup", out, re.M))
modes = {}
for line in open(work + "/modes.log"):
    m = line.split()[3]
    modes[m] = modes.get(m, 0) + 1
summary = (re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)\s*=*$", out, re.M) or ["no summary: see pytest's output"])[-1]
if not xs:
    sys.exit("no set-up times in pytest's output:\n" + out[-2000:])
q = lambda f: xs[min(len(xs) - 1, int(f * len(xs)))]
print(f"wall {t1 - t0:.1f} s; {summary}; modes {modes}; set-up p50 {q(.5):.0f} ms p99 {q(.99):.0f} ms max {xs[-1]:.0f} ms")
PY
