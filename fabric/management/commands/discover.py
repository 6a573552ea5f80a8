"""``manage.py discover [--fabric NAME]``: live discovery (ibnetdiscover) of one or all live fabrics."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.collectors.ibnetdiscover import DiscoveryError
from fabric.collectors.tools import is_live
from fabric.models import NO_LIVE_ACCESS, Fabric
from fabric.services.discovery import discover
from fabric.services.ingest import summary


class Command(BaseCommand):
    help = "Discover a fabric live with ibnetdiscover; prints a JSON summary as the last line."

    def add_arguments(self, parser):
        parser.add_argument("--fabric", help="fabric name (default: every live-discoverable fabric)")
        parser.add_argument(
            "--timeout", type=float, help="seconds (default: the fabric's discovery_timeout_s)"
        )

    def handle(self, *args, **opts):
        if opts["fabric"]:
            fabric = Fabric.objects.filter(name=opts["fabric"]).first()
            if fabric is None:
                raise CommandError(f"no fabric named {opts['fabric']!r}")
            if not fabric.has_live_access:  # as the API's 409: the diags would read another fabric
                raise CommandError(NO_LIVE_ACCESS.format(name=fabric.name))
            fabrics = [fabric]
        else:
            fabrics = [f for f in Fabric.objects.filter(discovery_enabled=True) if is_live(f)]
            if not fabrics:
                raise CommandError(
                    "no live-discoverable fabric (discovery_enabled with tool_env or ca_name set)"
                )
        results = []
        failed = []
        for fabric in fabrics:
            try:
                results.append(summary(discover(fabric, timeout=opts["timeout"])))
            except DiscoveryError as exc:
                failed.append(fabric.name)
                results.append({"fabric": fabric.name, "status": "failed", "error": exc.reason})
                self.stderr.write(f"{fabric.name}: discovery failed: {exc.reason}")
        out = results[0] if len(results) == 1 else _total(results)
        self.stdout.write(json.dumps(out))
        if failed:
            raise CommandError(f"discovery failed for {', '.join(failed)}")


def _total(results: list[dict]) -> dict:
    keys = ("switches", "cas", "routers", "links", "ports", "added", "removed", "changed", "warnings")
    total = {k: sum(r.get(k, 0) for r in results) for k in keys}
    total["fabrics"] = results
    return total
