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
    section = _section()
    unit = section[section.index("```ini") : section.index("```", section.index("```ini") + 6)]
    assert "ExecStart=/opt/weft/.venv/bin/python manage.py listen_notices" in unit
    assert "Restart=always" in unit and "WantedBy=multi-user.target" in unit
