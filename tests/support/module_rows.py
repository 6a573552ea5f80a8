"""Rows built once for a test module and rolled back at its end: Django ``TestCase.setUpTestData``'s
model for pytest (``django.test.testcases.TestCase.setUpClass`` and ``TestData``).

A module-scoped fixture builds the rows inside a transaction of its own (:func:`module_rows`);
each test's ``db`` fixture then opens its own atomic block inside it, a savepoint, which
pytest-django rolls back after the test (its ``TestCase`` skips Django's class-level set-up and
tear-down, which would close the connection, so that tests can be wrapped in a transaction of a
wider scope: ``pytest_django.fixtures._django_db_helper``). So every test sees the rows as
built, whatever the previous test wrote. A test gets its own copies of the built objects
(``copy.deepcopy``, as ``TestData`` hands them out), since a test may change one in memory
(``refresh_from_db`` after a service call).

Only for modules whose tests use ``db`` (never ``transactional_db``: a flush cannot run inside
the module's transaction), and whose tests keep no state outside the database that the rows'
building would have reset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, transaction
from django.test import override_settings

T = TypeVar("T")

#: The root conftest's autouse per-test settings (``_fast_password_hashing``,
#: ``_sweep_publish_inline``), in force while a module's rows are built: those fixtures are
#: function-scoped and the rows are built before any of them runs.
TEST_SETTINGS = {
    "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"],
    "WEFT_SWEEP_PUBLISH_ASYNC": False,
}


def module_rows(django_db_blocker, build: Callable[[], T], using: str = DEFAULT_DB_ALIAS) -> Iterator[T]:
    """Yield ``build()``, run in a transaction on ``using`` that is rolled back once the generator
    is closed or resumed (a module-scoped fixture: ``yield from module_rows(...)``, with
    ``django_db_setup`` among its arguments so the test database exists).

    The transaction's atomic block is marked as a test case's (``_from_testcase``, as Django's
    ``TestCase._enter_atomics`` does), so ``atomic(durable=True)`` still works in the tests.
    Database access stays blocked between the tests, as without this fixture. Raises what
    ``build`` raises (after the rollback).
    """
    with django_db_blocker.unblock():
        atomic = transaction.atomic(using=using)
        atomic._from_testcase = True
        atomic.__enter__()
        try:
            with override_settings(**TEST_SETTINGS):
                rows = build()
        except BaseException:
            transaction.set_rollback(True, using=using)
            atomic.__exit__(None, None, None)
            raise
    try:
        yield rows
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True, using=using)
            atomic.__exit__(None, None, None)
