"""``manage.py backup_check [--json]``: what a database holds, and whether Weft can run on it.

Run it on a restored database (README, "Backup and restore") before starting Weft on it, and on
the live one to compare: it prints the row count of the tables an operator checks after a restore
(:data:`COUNTED`: fabrics, partitions, pools, allocations, jobs, the audit log...), the newest
audit entry and sweep (how recent the copy is), the migrations not applied, and on PostgreSQL the
audit log's append-only triggers (``accounts.append_only_sql``, migration ``accounts.0002``) that
are missing. Exit status 1, with one line per problem on stderr, when a migration is not applied
or a trigger is missing. Reads only.
"""

from __future__ import annotations

import json

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

#: ``{name printed: "app_label.Model"}``: the tables compared after a restore
COUNTED = {
    "fabrics": "fabric.Fabric",
    "nodes": "fabric.Node",
    "ports": "fabric.Port",
    "links": "fabric.Link",
    "partitions": "fabric.Partition",
    "partition_members": "fabric.PartitionMember",
    "isolated_ports": "fabric.IsolatedPort",
    "tenants": "pools.Tenant",
    "pools": "pools.Pool",
    "gpus": "pools.Gpu",
    "allocations": "pools.Allocation",
    "jobs": "scheduler.Job",
    "devices": "devices.Device",
    "events": "events.Event",
    "alarms": "events.Alarm",
    "sweeps": "telemetry.Sweep",
    "users": "auth.User",
    "api_tokens": "accounts.ApiToken",
    "audit_entries": "accounts.AuditEntry",
}
#: the audit log's triggers on PostgreSQL (``accounts`` migrations 0002 and 0003)
AUDIT_TRIGGERS = ("accounts_auditentry_append_only", "accounts_auditentry_no_truncate")


def audit_triggers(connection) -> list[str]:
    """The names of the (non-internal) triggers on ``accounts_auditentry`` (PostgreSQL), sorted."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'accounts_auditentry'::regclass "
            "AND NOT tgisinternal ORDER BY tgname"
        )
        return [row[0] for row in cur.fetchall()]


def report(alias: str = DEFAULT_DB_ALIAS) -> dict:
    """``{"counts": {name: rows}, "latest": {"audit_entry", "sweep"} (ISO times or None),
    "unapplied": ["app.migration", ...], "audit_triggers": [...] (PostgreSQL only),
    "problems": [str, ...]}`` of the database ``alias``."""
    connection = connections[alias]
    counts = {name: apps.get_model(label).objects.using(alias).count() for name, label in COUNTED.items()}
    latest = {}
    for name, label, field in (
        ("audit_entry", "accounts.AuditEntry", "at"),
        ("sweep", "telemetry.Sweep", "started"),
    ):
        at = (
            apps.get_model(label)
            .objects.using(alias)
            .order_by(f"-{field}")
            .values_list(field, flat=True)
            .first()
        )
        latest[name] = at.isoformat() if at else None
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    out = {"counts": counts, "latest": latest, "unapplied": [f"{m.app_label}.{m.name}" for m, _ in plan]}
    problems = [f"migration {name} is not applied (run migrate)" for name in out["unapplied"]]
    if connection.vendor == "postgresql":
        out["audit_triggers"] = audit_triggers(connection)
        problems += [
            f"trigger {name} of accounts_auditentry is missing: the audit log is not append-only"
            for name in AUDIT_TRIGGERS
            if name not in out["audit_triggers"]
        ]
    out["problems"] = problems
    return out


class Command(BaseCommand):
    help = (
        "Print the row counts of the tables to compare after a restore (fabrics, partitions, pools, "
        "allocations, jobs, the audit log...), the newest audit entry and sweep, unapplied migrations "
        "and missing audit-log triggers; exit status 1 when a migration or a trigger is missing."
    )

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON object")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="database alias")

    def handle(self, *args, **opts):
        out = report(opts["database"])
        if opts["json"]:
            self.stdout.write(json.dumps(out))
        else:
            for name, rows in out["counts"].items():
                self.stdout.write(f"{name:18} {rows}")
            for name, at in out["latest"].items():
                self.stdout.write(f"newest {name:11} {at or '-'}")
            if "audit_triggers" in out:
                self.stdout.write(f"audit triggers     {', '.join(out['audit_triggers']) or '-'}")
        if out["problems"]:
            raise CommandError("; ".join(out["problems"]))
