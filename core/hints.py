"""Command lines Weft prints for the admin to copy (the demo, ``fabric_lab``)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

#: the project directory (where ``manage.py`` is)
BASE_DIR = Path(__file__).resolve().parent.parent


def manage_py() -> str:
    """``<interpreter> manage.py`` as a shell command run from the project directory, with the
    interpreter running now (``.venv/bin/python`` after ``bin/setup``: a bare ``python`` in a new
    shell is not the virtualenv's and has no Django). Relative when the interpreter lies under the
    project directory, absolute otherwise."""
    exe = sys.executable or "python3"
    base = str(BASE_DIR)
    if os.path.isabs(exe) and exe.startswith(base.rstrip("/") + "/"):
        exe = os.path.relpath(exe, base)
    return f"{shlex.quote(exe)} manage.py"
