# What each test does under `manage.py test --parallel` and under
# pytest-django: write a marker row (committed), let the other workers
# write theirs, and check that only the golden's row and this process's
# rows are there; what it saw goes to $DBFORK_TEST_OUT.
import json
import os
import time

from django.db import connection

from notes.models import Note


def isolation_check(name):
    me = "p%d:" % os.getpid()
    Note.objects.create(who=me + name)
    time.sleep(0.2)
    rows = list(Note.objects.order_by("id").values_list("who", flat=True))
    others = [w for w in rows if w != "golden" and not w.startswith(me)]
    s = connection.settings_dict
    with open(os.path.join(os.environ["DBFORK_TEST_OUT"], "iso-%d.jsonl" % os.getpid()), "a") as f:
        f.write(json.dumps({"name": name, "pid": os.getpid(), "rows": rows, "others": others,
                            "port": str(s["PORT"]), "db": s["NAME"]}) + "\n")
    assert rows and rows[0] == "golden", rows
    assert not others, others
    assert me + name in rows, rows
