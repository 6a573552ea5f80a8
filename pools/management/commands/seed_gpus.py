"""``manage.py seed_gpus --fabric NAME [--per-host 8] [--mig-every K]``: lab GPUs (``pools.lab``)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from pools.lab import seed_lab_gpus


class Command(BaseCommand):
    help = "Give every CA host of a (lab) fabric rail-aligned GPUs; prints a JSON summary last."

    def add_arguments(self, parser):
        parser.add_argument("--fabric", required=True)
        parser.add_argument("--per-host", type=int, default=8, help="GPUs per host (default 8)")
        parser.add_argument(
            "--mig-every", type=int, default=0, help="MIG-partition the last GPU of every K-th host"
        )

    def handle(self, *args, **opts):
        try:
            fabric = Fabric.objects.get(name=opts["fabric"])
        except Fabric.DoesNotExist:
            raise CommandError(f"no fabric {opts['fabric']!r}") from None
        try:
            summary = seed_lab_gpus(fabric, opts["per_host"], mig_every=opts["mig_every"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(summary, sort_keys=True))
