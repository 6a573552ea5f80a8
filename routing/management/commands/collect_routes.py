"""``manage.py collect_routes <fabric> [--dump-lfts]``: read a fabric's forwarding tables now
(``routing.services.collect.collect_routes``); the last line of stdout is the JSON summary."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from routing.services.collect import RoutesError, collect_routes, summary


class Command(BaseCommand):
    help = "Read the switches' unicast forwarding tables of a fabric and store them when they changed."

    def add_arguments(self, parser):
        parser.add_argument("fabric", help="fabric name")
        parser.add_argument("--dump-lfts", action="store_true", help="read with dump_lfts instead of SMPs")

    def handle(self, *args, **opts):
        fabric = Fabric.objects.filter(name=opts["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric {opts['fabric']!r}")
        try:
            snap = collect_routes(fabric, reason="manual", use_mad=not opts["dump_lfts"])
        except RoutesError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps(summary(snap)))
