#!/usr/bin/env bash
# Django's own `manage.py test --parallel 4` on MariaDB (create test_app,
# migrate, then 4 clones by mysqldump | mysql) against the same run with
# TEST_RUNNER = pytest_dbfork.django.DbforkRunner (a lease per worker from
# a golden that already holds the migrated, seeded schema). The project is
# clients/python/tests/django_project with a data migration adding ROWS
# rows. Prints Django's "Total database setup" (--timing) and the whole
# command's wall time for each run. Needs root, MariaDB, a built
# bin/dbfork and a python with Django, PyMySQL and pytest_dbfork
# importable (PY). Usage: sudo PY=venv/bin/python bench/django-parallel.sh [RUNS] [ROWS]
set -euo pipefail
runs=${1:-3}
rows=${2:-200000}
py=${PY:-python3}
repo="$(cd "$(dirname "$0")/.." && pwd)"
bin="$repo/bin/dbfork"
work="$(mktemp -d /tmp/dbfork-django-bench-XXXXXX)"
chmod 755 "$work"
store="$work/store"
export DBFORK_BIN="$bin" DBFORK_STORE="$store" DBFORK_STORE_FS="${DBFORK_STORE_FS:-auto}"
export PYTHONPATH="$repo/clients/python" DJANGO_TEST_ENGINE=mysql
unset DBFORK_SOCKET DATABASE_URL
cleanup() {
  "$bin" --store "$store" down --all >/dev/null 2>&1 || true
  "$bin" --store "$store" daemon stop >/dev/null 2>&1 || true
  "$bin" --store "$store" gc --all >/dev/null 2>&1 || true
  if [ -e "$store.img" ]; then "$bin" --store "$store" store umount >/dev/null 2>&1 || true; fi
  if ! grep -q " $work/" /proc/self/mounts; then rm -rf "$work"; fi
}
trap cleanup EXIT
proj="$work/proj"
cp -r "$repo/clients/python/tests/django_project" "$proj"
printf 'from .settings import *  # noqa: F403\n\nTEST_RUNNER = "django.test.runner.DiscoverRunner"\n' \
  > "$proj/mysite/settings_django.py"
cat > "$proj/notes/migrations/0002_seed.py" <<PYEOF
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("notes", "0001_initial")]
    operations = [migrations.RunSQL(
        "INSERT INTO notes_note(who) SELECT CONCAT('row-', seq, '-', MD5(seq)) FROM seq_1_to_$rows")]
PYEOF
python3 - "$proj/notes/tests.py" "$rows" <<'PYEOF'
import sys
path, rows = sys.argv[1], int(sys.argv[2])
body = ["from django.test import TestCase\n\nfrom notes.models import Note\n"]
for i in range(8):
    body.append("\n\nclass Seed%d(TestCase):\n    def test_seed(self):\n        self.assertEqual(Note.objects.count(), %d)\n" % (i, rows))
open(path, "w").write("".join(body))
PYEOF
cat > "$proj/dbfork.toml" <<TOML
engine = "mariadb"
database = "app"
[[load]]
run = "$py manage.py migrate --noinput"
inputs = ["manage.py", "mysite/settings.py", "notes/models.py", "notes/migrations/0001_initial.py", "notes/migrations/0002_seed.py"]
[pool]
min = 4
max = 8
TOML
cd "$proj"
echo "building the golden ($rows rows)..." >&2
"$bin" build -f dbfork.toml >/dev/null
# Django's own: a server (an instance of the golden; its user may create
# databases) where the default runner creates, migrates and clones.
up="$("$bin" up -f dbfork.toml --json)"
url="$(printf '%s' "$up" | python3 -c 'import json,sys; print(json.load(sys.stdin)["dsn"])')"
run() { # label, env...
  local label=$1; shift
  local t0 t1 out
  t0=$(date +%s.%N)
  out="$(env "$@" "$py" manage.py test --parallel 4 --timing --noinput notes 2>&1)" || { echo "$out" >&2; exit 1; }
  t1=$(date +%s.%N)
  took() { printf '%s\n' "$out" | awk -v k="$1" 'index($0, k) {print $NF; exit}' | tr -d 's,' | grep . || echo -; }
  printf '%s setup=%ss create=%ss clone=%ss wall=%.2fs\n' "$label" "$(took 'Total database setup took')" \
    "$(took "Creating 'default' took")" "$(took "Cloning 'default' took")" "$(echo "$t1 - $t0" | bc)"
}
for i in $(seq "$runs"); do
  run "django-own(template+mysqldump x4)" DATABASE_URL="$url" DJANGO_SETTINGS_MODULE=mysite.settings_django
  run "dbfork(DbforkRunner)" DBFORK_RECIPE="$proj/dbfork.toml" DJANGO_SETTINGS_MODULE=mysite.settings
done
