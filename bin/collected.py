"""The test ids bin/test selects: the SQLite phase (``-m "not integration"``) and the PostgreSQL
phase (``-m "integration or backend"``), collected with ``pytest --collect-only -q``.

usage: .venv/bin/python bin/collected.py [BEFORE]

BEFORE: a file of node ids, one a line (e.g. an older ``pytest --collect-only -q``); the exit
status is 1 when one of them is selected by neither phase.

Prints each phase's count, the union and, with BEFORE, the ids of BEFORE that neither phase selects.
Collection only: no test runs (the PostgreSQL phase is collected without a database).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = {"sqlite": "not integration", "postgresql": "integration or backend"}


def collect(marker: str) -> set[str]:
    """Node ids ``pytest --collect-only -q -m marker`` selects (raises on a collection error)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marker],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode not in (0, 5):
        raise SystemExit(
            f"collection failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return {line.strip() for line in proc.stdout.splitlines() if "::" in line}


def main() -> int:
    phases = {name: collect(marker) for name, marker in PHASES.items()}
    union = set().union(*phases.values())
    for name, ids in phases.items():
        print(f"{name}: {len(ids)} (-m {PHASES[name]!r})")
    print(f"both phases: {len(phases['sqlite'] & phases['postgresql'])}; union: {len(union)}")
    if len(sys.argv) > 1:
        before = {line.strip() for line in Path(sys.argv[1]).read_text().splitlines() if "::" in line}
        lost = sorted(before - union)
        print(f"before: {len(before)}; selected now: {len(before & union)}; lost: {len(lost)}")
        for node in lost:
            print(f"  lost: {node}")
        return 1 if lost else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
