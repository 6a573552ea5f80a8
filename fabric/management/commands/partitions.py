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
        parser.add_argument("--set-path", help="store the fabric's partitions file (what OpenSM reads, -P)")
        parser.add_argument("--set-pid-file", help="store the pid file of the fabric's OpenSM (SIGHUP)")
        parser.add_argument(
            "--set-reload-command",
            help="store a command (shell words) run instead of SIGHUP; '' clears it",
        )

    def handle(self, *args, **opts):
        try:
            fabric = Fabric.objects.get(name=opts["fabric"])
        except Fabric.DoesNotExist:
            raise CommandError(f"no fabric {opts['fabric']!r}") from None
        changed = self._configure(fabric, opts)
        if changed and not opts["apply"]:
            self.stdout.write(json.dumps({"fabric": fabric.name, "configured": changed}))
            return
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

    def _configure(self, fabric: Fabric, opts) -> dict:
        """Store the site's partitions file, pid file or reload command (shell access only: the API
        never sets them). Audited."""
        import shlex

        from django.db import transaction

        from accounts import audit

        changed = {}
        if opts.get("set_path") is not None:
            changed["partitions_path"] = opts["set_path"]
        if opts.get("set_pid_file") is not None:
            changed["sm_pid_file"] = opts["set_pid_file"]
        if opts.get("set_reload_command") is not None:
            changed["sm_reload_command"] = shlex.split(opts["set_reload_command"])
        if changed:
            with transaction.atomic():
                for k, v in changed.items():
                    setattr(fabric, k, v)
                fabric.save(update_fields=list(changed))
                audit.record("fabric.partitions_config", fabric, changed)
        return changed
