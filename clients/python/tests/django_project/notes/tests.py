from django.test import SimpleTestCase

from notes.checks import isolation_check


class Iso0(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso0")


class Iso1(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso1")


class Iso2(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso2")


class Iso3(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso3")


class Iso4(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso4")


class Iso5(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso5")


class Iso6(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso6")


class Iso7(SimpleTestCase):
    databases = {"default"}  # queries allowed, no transaction around them: the rows are committed

    def test_only_this_workers_rows(self):
        isolation_check("Iso7")
