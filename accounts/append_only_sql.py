"""The SQL that keeps the audit log append-only in the database itself (issue 9, issue 22).

PostgreSQL: the row trigger of migration ``accounts.0002`` refuses UPDATE and DELETE but the
``user_id → NULL`` of a user's deletion; :data:`PG_NO_TRUNCATE` adds a statement-level ``BEFORE
TRUNCATE`` trigger (``TRUNCATE accounts_auditentry`` and ``TRUNCATE auth_user CASCADE`` are
refused). SQLite: :data:`SQLITE_TRIGGERS` refuse DELETE, and UPDATE but that same ``user_id →
NULL`` (every other column unchanged).

A trigger stops the application's own role and a single injected statement, not the table's
owner (who may drop it): run Weft as a role that does not own the tables and has no TRUNCATE
(README, "Database role"). The test suite's flush empties the tables between transactional tests
with these triggers set aside in the flush's own transaction (``conftest.py``,
:func:`flush_statements`).

Frozen as migration ``accounts.0003`` uses it: a change is a new migration. SQLite remakes a table
on most schema changes (``ALTER TABLE`` is copy-and-rename), which drops its triggers: a migration
that changes ``AuditEntry`` re-creates them (and adds a new column to the UPDATE trigger's list).
"""

from __future__ import annotations

PG_NO_TRUNCATE = [
    """
CREATE OR REPLACE FUNCTION accounts_auditentry_no_truncate() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit entries are append-only: TRUNCATE refused'
        USING ERRCODE = 'restrict_violation';
END;
$$ LANGUAGE plpgsql
""",
    """
CREATE TRIGGER accounts_auditentry_no_truncate
    BEFORE TRUNCATE ON accounts_auditentry
    FOR EACH STATEMENT EXECUTE FUNCTION accounts_auditentry_no_truncate()
""",
]
PG_DROP_NO_TRUNCATE = [
    "DROP TRIGGER IF EXISTS accounts_auditentry_no_truncate ON accounts_auditentry",
    "DROP FUNCTION IF EXISTS accounts_auditentry_no_truncate()",
]

#: every column but ``user_id``: an UPDATE that changes one of them is refused
_KEPT = (
    "id",
    "at",
    "username",
    "action",
    "object_type",
    "object_id",
    "object_repr",
    "changes",
    "remote_addr",
)

SQLITE_TRIGGERS = [
    """
CREATE TRIGGER accounts_auditentry_no_delete BEFORE DELETE ON accounts_auditentry
BEGIN
    SELECT RAISE(ABORT, 'audit entries are append-only: DELETE refused');
END
""",
    f"""
CREATE TRIGGER accounts_auditentry_no_update BEFORE UPDATE ON accounts_auditentry
WHEN NOT (NEW.user_id IS NULL AND {" AND ".join(f"NEW.{c} IS OLD.{c}" for c in _KEPT)})
BEGIN
    SELECT RAISE(ABORT, 'audit entries are append-only: UPDATE refused');
END
""",
]
SQLITE_DROP_TRIGGERS = [
    "DROP TRIGGER IF EXISTS accounts_auditentry_no_delete",
    "DROP TRIGGER IF EXISTS accounts_auditentry_no_update",
]


def add_triggers(schema_editor) -> None:
    """Create this module's triggers for the connection's database (PostgreSQL, SQLite)."""
    vendor = schema_editor.connection.vendor
    for statement in (
        PG_NO_TRUNCATE if vendor == "postgresql" else SQLITE_TRIGGERS if vendor == "sqlite" else []
    ):
        schema_editor.execute(statement, params=None)  # None: a % in the SQL is not a parameter


def drop_triggers(schema_editor) -> None:
    """Drop what :func:`add_triggers` created."""
    vendor = schema_editor.connection.vendor
    for statement in (
        PG_DROP_NO_TRUNCATE if vendor == "postgresql" else SQLITE_DROP_TRIGGERS if vendor == "sqlite" else []
    ):
        schema_editor.execute(statement, params=None)


def flush_statements(vendor: str, statements: list[str]) -> list[str]:
    """``statements`` (Django's ``sql_flush`` of a test flush) run with the append-only triggers
    set aside for their own transaction: on PostgreSQL ``SET LOCAL session_replication_role =
    replica`` (no ordinary trigger fires; superuser only, as the test database's role is), on
    SQLite the triggers dropped before and created again after. For the test suite only."""
    if not statements:
        return statements
    if vendor == "postgresql":
        return ["SET LOCAL session_replication_role = replica", *statements]
    if vendor == "sqlite":
        return [*SQLITE_DROP_TRIGGERS, *statements, *(s.strip() for s in SQLITE_TRIGGERS)]
    return statements
