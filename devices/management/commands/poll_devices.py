"""``manage.py poll_devices [--device NAME ...] [--inventory]``: poll SNMP devices now.

Polls the named devices (default: every enabled one) once, concurrently, stores them, applies
their events and rules; prints one line per device and, last, a JSON summary.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from devices.models import Device
from devices.services.poll import poll_devices


class Command(BaseCommand):
    help = "Poll SNMP devices once (all enabled ones, or --device NAME)."

    def add_arguments(self, parser):
        parser.add_argument("--device", action="append", default=[], help="device name (repeatable)")
        parser.add_argument("--inventory", action="store_true", help="also re-read identity and entities")

    def handle(self, *args, device, inventory, **opts):
        qs = Device.objects.select_related("fabric")
        if device:
            devices = list(qs.filter(name__in=device))
            missing = sorted(set(device) - {d.name for d in devices})
            if missing:
                raise CommandError(f"no device named {', '.join(missing)}")
        else:
            devices = list(qs.filter(enabled=True))
        results = poll_devices(devices, inventory=True if inventory else None)
        for r in results:
            self.stdout.write(
                f"{r['device']}: {r['status']} {r['interfaces']} interfaces {r['error']}".rstrip()
            )
        self.stdout.write(json.dumps({"devices": len(results), "ok": sum(r["status"] == "ok" for r in results),
                                      "results": results}))  # fmt: skip
