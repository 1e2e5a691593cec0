# A tiny Django project for the dbfork tests. DATABASE_URL is what
# dbfork gives the recipe's `manage.py migrate` step; under test, the
# dbfork runner (or the pytest plugin) points "default" at a lease, so
# the placeholder values below are never used.
import os
from urllib.parse import unquote, urlsplit

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["notes"]
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

_url = urlsplit(os.environ.get("DATABASE_URL") or "%s://placeholder@127.0.0.1:1/not_a_database"
                % os.environ.get("DJANGO_TEST_ENGINE", "postgres"))
if _url.scheme == "mysql":
    import pymysql
    pymysql.version_info = (2, 2, 1, "final", 0)  # Django asks for mysqlclient >= 2.2.1
    pymysql.install_as_MySQLdb()
DATABASES = {"default": {
    "ENGINE": {"postgres": "django.db.backends.postgresql", "mysql": "django.db.backends.mysql"}[_url.scheme],
    "HOST": _url.hostname, "PORT": _url.port, "USER": unquote(_url.username or ""),
    "PASSWORD": unquote(_url.password or ""), "NAME": _url.path.lstrip("/"),
}}

TEST_RUNNER = "pytest_dbfork.django.DbforkRunner"
