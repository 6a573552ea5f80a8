"""``manage.py partitions --fabric NAME [--apply]``: print (or apply) a fabric's partitions.conf."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.services.partitions import apply, generate_conf


class Command(BaseCommand):
    help = (
        "Print the OpenSM partitions.conf Weft generates for a fabric; --apply writes it to the "
        "fabric's partitions file, makes OpenSM re-read it and verifies the ports (smpquery pkeys), "
        "printing a JSON summary as the last line (exit status 1 when it failed or drifted)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--fabric", required=True, help="fabric name")
        parser.add_argument("--apply", action="store_true", help="write, signal OpenSM, verify")
        parser.add_argument("--timeout", type=float, default=None, help="verification wait, seconds")
        parser.add_argument("--sample", type=int, default=None, help="ports verified per partition and side")

    def handle(self, *args, **opts):
        try:
            fabric = Fabric.objects.get(name=opts["fabric"])
        except Fabric.DoesNotExist:
            raise CommandError(f"no fabric {opts['fabric']!r}") from None
        if not opts["apply"]:
            self.stdout.write(generate_conf(fabric), ending="")
            return
        result = apply(fabric, timeout=opts["timeout"], sample=opts["sample"])
        if result.error:
            self.stderr.write(f"partitions of {fabric.name} not applied: {result.error}")
        for d in result.drift[:20]:
            self.stderr.write(
                f"drift: {d['partition']} ({d['pkey']}) port {d['guid']}: expected {d['expected']}, seen {d['seen']}"
            )
        self.stdout.write(json.dumps(result.as_dict() | {"drift": len(result.drift)}))
        self.stdout.flush()
        if not result.ok:
            sys.exit(1)
