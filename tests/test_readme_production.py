"""The README's production section stays runnable: every ``manage.py`` command it lists exists, and
the systemd unit starts the notice listener with the same interpreter and command."""

from __future__ import annotations

import re
from pathlib import Path

from django.core.management import get_commands

ROOT = Path(__file__).resolve().parents[1]


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Production deployment")
    return text[start : text.index("\n## ", start + 1)]


def test_every_manage_py_command_of_the_production_section_exists():
    section = _section()
    commands = re.findall(r"manage\.py (\w+)", section)
    assert {"migrate", "collectstatic", "createsuperuser", "listen_notices", "check"} <= set(commands)
    missing = sorted(set(commands) - set(get_commands()))
    assert missing == []


def test_the_systemd_unit_restarts_the_listener():
    """The README points at the shipped units (``deploy/systemd``, checked one by one in
    ``tests/test_deploy_units.py``); the notice listener's restarts itself."""
    assert "deploy/systemd/" in _section()
    unit = (ROOT / "deploy" / "systemd" / "weft-notices.service").read_text()
    assert "ExecStart=/opt/weft/.venv/bin/python manage.py listen_notices" in unit
    assert "Restart=always" in unit and "WantedBy=weft.target" in unit


def test_the_database_is_created_before_migrate():
    """A fresh user following the section has the database of ``DATABASE_URL`` and its owner
    created before the prod-commands block (``migrate`` does not create databases)."""
    from urllib.parse import urlsplit

    section = _section()
    url = urlsplit(re.search(r"export DATABASE_URL=(\S+)", section).group(1))
    user, database = url.username, url.path.lstrip("/")
    before = section[: section.index("<!-- prod-commands")]
    assert re.search(rf"createuser\b[^\n]*\b{user}\b", before)
    assert re.search(rf"createdb --owner {user} {database}\b", before)


def test_the_tests_section_says_what_bin_test_runs_and_how_to_run_a_subset():
    text = (ROOT / "README.md").read_text()
    tests = text[text.index("## Tests") : text.index("\n## ", text.index("## Tests") + 1)]
    flat = " ".join(tests.split())
    order = ["ruff", "Django's checks", "two lanes", "the suite on SQLite", "bin/prod-smoke",
             "pytest on PostgreSQL", "bin/bench-smoke"]  # fmt: skip
    assert [flat.index(step) for step in order] == sorted(flat.index(step) for step in order)
    assert ".venv/bin/python -m pytest events/tests/test_notify.py" in flat
    script = (ROOT / "bin" / "test").read_text()
    assert script.count("-m pytest") == 2 and "ruff check" in script and "bin/prod-smoke" in script
