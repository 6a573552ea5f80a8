"""Fixtures of the scheduler tests: every test starts without a cached locality tree (test
databases roll back, so primary keys repeat between tests)."""

import pytest


@pytest.fixture(autouse=True)
def _fresh_locality():
    from scheduler.services.state import forget_locality

    forget_locality()
    yield
    forget_locality()
