"""``bin/prod-smoke`` runs the README's production block as written: the block holds the commands
the issue names, and the smoke script reads them from the README (nothing copied)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_smoke_test_runs_the_readme_production_commands():
    spec = importlib.util.spec_from_file_location("prod_smoke", ROOT / "bin" / "prod_smoke.py")
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    lines = smoke.readme_commands()
    programs = [" ".join(line.split("#")[0].split()[:4]) for line in lines]
    assert programs == [
        ".venv/bin/python manage.py check --deploy",
        ".venv/bin/python manage.py migrate --noinput",
        ".venv/bin/python manage.py collectstatic --noinput",
        ".venv/bin/python manage.py createsuperuser --noinput",
        ".venv/bin/daphne -b 127.0.0.1 -p",
        ".venv/bin/celery -A weft worker",  # -Q control
        ".venv/bin/celery -A weft worker",  # -Q fabric
        ".venv/bin/celery -A weft beat",
        ".venv/bin/python manage.py listen_notices",
    ]
    queues = [line.split()[5] for line in lines if " worker -Q " in line]
    assert queues == ["control", "fabric"]  # fabric I/O and control work on their own workers
    readme = (ROOT / "README.md").read_text()
    assert all(line in readme for line in lines)
    assert "bin/prod-smoke" in (ROOT / "bin" / "test").read_text()
