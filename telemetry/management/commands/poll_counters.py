"""``manage.py poll_counters [--fabric NAME] [--reset]``: one counter sweep; JSON summary last line."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import NO_LIVE_ACCESS, Fabric
from telemetry.models import SweepStatus
from telemetry.services.sweep import poll_fabric


class Command(BaseCommand):
    help = (
        "Read the port counters of a fabric once (rates, congestion, history) and print a JSON summary "
        "as the last line: ports, stale, duration_s, saturated (counters), saturated_ports, resets. "
        "Counters are never reset unless --reset is given (audited)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--fabric", help="fabric name (default: every fabric with polling enabled and live access)"
        )
        parser.add_argument(
            "--reset",
            action="store_true",
            help="clear the counters on the fabric after reading them (audited)",
        )
        parser.add_argument(
            "--extended", choices=("auto", "never"), default="auto", help="64-bit counters policy"
        )
        parser.add_argument(
            "--mechanism", choices=("mad", "perfquery"), help="collector (default WEFT_POLL_MECHANISM)"
        )
        parser.add_argument("--timeout", type=float, help="seconds for the collector")

    def handle(self, *args, **opts):
        if opts["fabric"]:
            fabric = Fabric.objects.filter(name=opts["fabric"]).first()
            if fabric is None:
                raise CommandError(f"no fabric named {opts['fabric']!r}")
            if not fabric.has_live_access:  # the diags would read (or --reset clear) another fabric
                raise CommandError(NO_LIVE_ACCESS.format(name=fabric.name))
            fabrics = [fabric]
        else:
            fabrics = [f for f in Fabric.objects.filter(polling_enabled=True) if f.has_live_access]
            if not fabrics:
                raise CommandError(
                    "no pollable fabric (polling_enabled with live access: local_hca, ca_name or tool_env); use --fabric"
                )
        results = []
        for fabric in fabrics:
            if opts["reset"]:
                self.stderr.write(f"{fabric.name}: counters will be cleared on the fabric after this read")
            sweep = poll_fabric(
                fabric,
                reset=opts["reset"],
                extended=opts["extended"],
                mechanism=opts["mechanism"],
                timeout=opts["timeout"],
            )
            if sweep.status == SweepStatus.FAILED:
                self.stderr.write(f"{fabric.name}: sweep failed: {sweep.error}")
            results.append(
                {**sweep.summary(), "reset_done": bool(opts["reset"] and sweep.status != SweepStatus.FAILED)}
            )
        if len(results) == 1:
            out = results[0]
        else:
            out = {
                k: sum(r[k] for r in results)
                for k in ("ports", "stale", "saturated", "saturated_ports", "resets")
            }
            out["duration_s"] = round(sum(r["duration_s"] or 0 for r in results), 4)
            out["fabrics"] = results
        self.stdout.write(json.dumps(out))
        if all(r["status"] == SweepStatus.FAILED for r in results):
            raise CommandError("every sweep failed")
