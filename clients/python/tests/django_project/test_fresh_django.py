# pytest-django with dbfork_fresh: the ORM follows each test's fresh
# database with no change to the test (no mark, no blocker).
import pytest
from django.db import connection

from notes.models import Note


@pytest.mark.parametrize("n", range(3))
def test_orm_follows_fresh(dbfork_fresh, n):
    assert connection.settings_dict["PORT"] == str(dbfork_fresh.dsn.rsplit(":", 1)[1].split("/")[0])
    rows = list(Note.objects.values_list("who", flat=True))
    assert rows == ["golden"], rows  # no earlier test's row
    Note.objects.create(who="t%d" % n)


def test_session_lease_untouched(django_db_blocker, django_db_setup):
    with django_db_blocker.unblock():
        assert list(Note.objects.values_list("who", flat=True)) == ["golden"]


@pytest.mark.django_db
def test_mark_refused(dbfork_fresh):
    pass
