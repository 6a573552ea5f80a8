"""Project-wide test configuration."""

import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.browser_support", "tests.process_support"]

REALDATA = Path(os.environ.get("WEFT_REALDATA", Path(__file__).resolve().parents[1] / "shared" / "realdata"))


@pytest.fixture(scope="session")
def realdata() -> Path:
    """The folder of public real-fabric outputs (``$WEFT_REALDATA``); skips when absent."""
    if not REALDATA.is_dir():
        pytest.skip(f"WEFT_REALDATA folder {REALDATA} is absent: real-fabric data tests skipped")
    return REALDATA


def pytest_collection_modifyitems(config, items):
    """Skip ``integration`` tests unless PostgreSQL and Redis are configured."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")) and os.environ.get("REDIS_URL"):
        return
    skip = pytest.mark.skip(reason="integration: set DATABASE_URL (PostgreSQL) and REDIS_URL to run")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)
