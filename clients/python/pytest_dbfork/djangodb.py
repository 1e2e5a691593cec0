"""pytest-django: `django_db_setup` overridden, so each pytest process
(each xdist worker) runs against its own dbfork lease, with the golden's
schema and seed data; Django creates and migrates no test database.

Registered by the plugin when pytest-django is active. The recipe is the
plugin's (--dbfork-recipe / ini dbfork_recipe); the aliases pointed at the
lease are the Django setting DBFORK_ALIASES (default ["default"]).
"""

import pytest

from .client import DbforkError


@pytest.fixture(scope="session")
def django_db_setup(request, django_test_environment, django_db_blocker):
    from django.conf import settings

    from .django import point_aliases, restore_aliases
    from .django import check_engine
    d = request.config._dbfork
    aliases = list(getattr(settings, "DBFORK_ALIASES", ["default"]))
    try:
        check_engine(d.recipe, aliases)
    except DbforkError as e:
        pytest.fail(str(e), pytrace=False)
    lease = d.acquire()
    with django_db_blocker.unblock():
        try:
            saved = point_aliases(lease, aliases)
        except DbforkError as e:
            d.release(lease)
            pytest.fail(str(e), pytrace=False)
    yield lease
    with django_db_blocker.unblock():
        restore_aliases(saved)
    d.release(lease)
