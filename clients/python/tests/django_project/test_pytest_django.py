# pytest-django: `pytest -n 4` with the dbfork plugin.
import pytest

from notes.checks import isolation_check
from notes.models import Note


@pytest.mark.parametrize("n", range(8))
def test_only_this_workers_rows(django_db_blocker, django_db_setup, n):
    with django_db_blocker.unblock():  # autocommit: the rows are committed
        isolation_check("t%d" % n)


@pytest.mark.django_db
def test_seed_data_in_a_transaction():
    assert Note.objects.filter(who="golden").exists()
