"""The migrated template's key (``tests.support.migrated.migrations_key``): what changes what
``migrate`` writes makes a new template, so a stale one is never copied."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.support.migrated import ROOT, migrations_key


def _copy(tmp_path: Path) -> Path:
    """The files the key reads, in a folder of their own: ``requirements.txt``, every app's
    migrations and the project's modules (the apps' ``*.py``, not the virtualenv)."""
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(ROOT / "requirements.txt", root / "requirements.txt")
    for migrations in ROOT.glob("*/migrations"):
        app = migrations.parent
        for path in [*app.glob("*.py"), *migrations.glob("*.py")]:
            dest = root / path.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, dest)
    return root


def test_a_module_a_migration_imports_is_part_of_the_key(tmp_path):
    """``accounts.0003`` takes its trigger SQL from ``accounts/append_only_sql.py``: an edit there
    changes the migrated database, so it changes the key."""
    root = _copy(tmp_path)
    key = migrations_key(root)
    assert migrations_key(root) == key
    sql = root / "accounts" / "append_only_sql.py"
    sql.write_text(sql.read_text().replace("TRUNCATE refused", "TRUNCATE refused!"))
    assert migrations_key(root) != key


def test_a_module_no_migration_imports_is_not_part_of_the_key(tmp_path):
    root = _copy(tmp_path)
    key = migrations_key(root)
    (root / "accounts" / "views.py").write_text("# not read by any migration\n")
    assert migrations_key(root) == key
    (root / "accounts" / "migrations" / "0003_audit_no_truncate.py").write_text(
        (root / "accounts" / "migrations" / "0003_audit_no_truncate.py").read_text() + "\n# changed\n"
    )
    assert migrations_key(root) != key
