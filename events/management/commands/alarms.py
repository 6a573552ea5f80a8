"""``manage.py alarms [--active] [--fabric NAME] [--severity S]``: list alarms for scripts and checks.

Prints a readable table, then the alarms as a JSON list on the last line of stdout: each
``{"id", "type", "name", "severity", "state", "object", "object_type", "object_key", "fabric",
"first_seen", "last_seen", "count", "message", "acknowledged_by", "cleared_at"}``.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from events.models import Alarm, Severity
from fabric.models import Fabric


class Command(BaseCommand):
    help = "List alarms (newest first); the last line of output is a JSON list."

    def add_arguments(self, parser):
        parser.add_argument("--active", action="store_true", help="only open alarms (active or acknowledged)")
        parser.add_argument("--fabric", help="only alarms of this fabric (name)")
        parser.add_argument("--severity", choices=[s.value for s in Severity], help="only this severity")
        parser.add_argument("--limit", type=int, default=1000, help="at most this many (default 1000)")

    def handle(self, *args, active: bool, fabric: str | None, severity: str | None, limit: int, **opts):
        qs = Alarm.objects.select_related("fabric", "acknowledged_by").order_by("-last_seen", "-id")
        if fabric:
            if not Fabric.objects.filter(name=fabric).exists():
                raise CommandError(f"no fabric named {fabric!r} (known: "
                                   f"{', '.join(Fabric.objects.values_list('name', flat=True)) or 'none'})")  # fmt: skip
            qs = qs.filter(fabric__name=fabric)
        if active:
            qs = qs.open()
        if severity:
            qs = qs.filter(severity=severity)
        rows = [
            {
                "id": a.pk,
                "type": a.code,
                "name": a.name,
                "severity": a.severity,
                "state": a.state,
                "object": a.object_repr,
                "object_type": a.object_type,
                "object_key": a.object_key,
                "fabric": a.fabric.name if a.fabric_id else None,
                "first_seen": a.first_seen.isoformat(),
                "last_seen": a.last_seen.isoformat(),
                "count": a.count,
                "message": a.message,
                "acknowledged_by": a.acknowledged_by.username if a.acknowledged_by_id else None,
                "cleared_at": a.cleared_at.isoformat() if a.cleared_at else None,
            }
            for a in qs[: max(0, limit)]
        ]
        for r in rows:
            self.stdout.write(
                f"{r['severity']:<8} {r['state']:<12} {r['type']:<24} {r['object'][:60]:<60} "
                f"x{r['count']} last {r['last_seen'][:19]}"
            )
        if not rows:
            self.stdout.write("no alarms")
        self.stdout.write(json.dumps(rows))
