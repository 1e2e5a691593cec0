# scripts/test-install.sh: the pytest wheel for this machine, pip-installed
# from the file into a fresh venv of a fresh user (Debian's pytest, xdist
# and psycopg through the system site packages), runs a project with a
# dbfork.toml with no DBFORK_BIN and no dbfork on PATH.
h="$(new_home h-py)"
whl="$(ls "$OUT"/python/pytest_dbfork-"$VERSION"-py3-none-manylinux_2_17_"$PYPLAT"*.whl)"
as_user "$h" /usr/bin/python3 -m venv --system-site-packages "$h/venv"
as_user "$h" "$h/venv/bin/pip" install -q --no-index --no-deps "$whl"
proj="$h/proj-python"
mkdir -p "$proj"
write_recipe "$proj"
cat > "$proj/test_notes.py" <<'PY'
import os
import shutil

import psycopg


def test_no_dbfork_outside_the_package():
    assert shutil.which("dbfork") is None and "DBFORK_BIN" not in os.environ


def test_each_test_gets_the_golden(dbfork_db):
    with psycopg.connect(dbfork_db.dsn) as c:
        assert c.execute("select count(*) from notes").fetchone()[0] == 1
        c.execute("insert into notes(who) values ('a')")


def test_and_not_the_last_ones_rows(dbfork_db):
    with psycopg.connect(dbfork_db.dsn) as c:
        assert c.execute("select count(*) from notes").fetchone()[0] == 1
        c.execute("insert into notes(who) values ('b')")
PY
chown -R 65534:65534 "$proj"
out="$(IN="$proj" as_user "$h" "$h/venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 2>&1)" || fail "pytest with the wheel: $out"
grep -q "3 passed" <<<"$out" || fail "pytest with the wheel ran: $out"
as_user "$h" "$h/venv/bin/python" -c 'import pytest_dbfork, subprocess; print(subprocess.check_output([pytest_dbfork.find_binary(), "version"], text=True))' |
  grep -qF "dbfork $VERSION " || fail "the wheel's dbfork is not version $VERSION"
