"""``manage.py partitions --fabric NAME [--apply]``: print (or apply) a fabric's partitions.conf."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from fabric.choices import ApplyRunState
from fabric.models import Fabric
from fabric.services.partitions import generate_conf, request_apply, run_apply, wait_apply
from fabric.services.partitions.coalesce import apply_limit_s


class Command(BaseCommand):
    help = (
        "Print the OpenSM partitions.conf Weft generates for a fabric; --apply writes it to the "
        "fabric's partitions file, makes OpenSM re-read it and verifies the ports (smpquery pkeys), "
        "printing a JSON summary as the last line (exit status 1 when it failed or drifted). The apply "
        "is recorded (GET /api/fabric/partition-applies/<id>/) and goes through the same coalesced "
        "path as the API and the task: while another apply of the fabric runs, it joins that one."
    )

    def add_arguments(self, parser):
        parser.add_argument("--fabric", required=True, help="fabric name")
        parser.add_argument("--apply", action="store_true", help="write, signal OpenSM, verify")
        parser.add_argument("--timeout", type=float, default=None, help="verification wait, seconds")
        parser.add_argument("--set-path", help="store the fabric's partitions file (what OpenSM reads, -P)")
        parser.add_argument("--set-pid-file", help="store the pid file of the fabric's OpenSM (SIGHUP)")
        parser.add_argument(
            "--set-sm-pid-files",
            help="store the pid file of each OpenSM by its port GUID, 'GUID=PATH,GUID=PATH' (an HA pair: "
            "the apply signals the one sminfo names master); '' clears them",
        )
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
        rec = request_apply(fabric, source="command", timeout=opts["timeout"], queue=False)
        run_apply(rec.pk)  # in this process, through the coalesced path
        rec = wait_apply(rec.pk, apply_limit_s())  # a joined (coalesced) apply: its holder's result
        result = dict(rec.result or {})
        if rec.state not in (ApplyRunState.DONE, ApplyRunState.FAILED):
            result.setdefault("error", f"the apply it joined did not end within {apply_limit_s():g} s")
        if result.get("error"):
            self.stderr.write(f"partitions of {fabric.name} not applied: {result['error']}")
        for d in result.get("drift", [])[:20]:
            self.stderr.write(
                f"drift: {d['partition']} ({d['pkey']}) port {d['guid']}: expected {d['expected']}, seen {d['seen']}"
            )
        self.stdout.write(json.dumps(result | {"apply": rec.pk, "drift": len(result.get("drift", []))}))
        self.stdout.flush()
        if not rec.ok:
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
        if opts.get("set_sm_pid_files") is not None:
            changed["sm_pid_files"] = _pid_files(opts["set_sm_pid_files"])
        if opts.get("set_reload_command") is not None:
            changed["sm_reload_command"] = shlex.split(opts["set_reload_command"])
        if changed:
            with transaction.atomic():
                for k, v in changed.items():
                    setattr(fabric, k, v)
                fabric.save(update_fields=list(changed))
                audit.record("fabric.partitions_config", fabric, changed)
        return changed


def _pid_files(text: str) -> dict[str, str]:
    """``{port GUID (canonical): pid file}`` of ``"GUID=PATH,GUID=PATH"``.

    Raises:
        CommandError: an item without ``=`` or a GUID that is not one.
    """
    from fabric.guid import normalize_guid

    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        guid, eq, path = item.partition("=")
        if not eq or not path.strip():
            raise CommandError(f"--set-sm-pid-files: {item!r} is not GUID=PATH")
        try:
            out[normalize_guid(guid.strip())] = path.strip()
        except ValueError as exc:
            raise CommandError(f"--set-sm-pid-files: {guid!r}: {exc}") from None
    return out
