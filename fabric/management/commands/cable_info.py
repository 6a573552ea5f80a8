"""``manage.py cable_info FABRIC [--file FILE ... [--format db_csv|mlxlink] [--port GUID:PORT]]``:
import saved cable and transceiver outputs (an ibdiagnet2 ``db_csv`` with ``CABLE_INFO``, or
``mlxlink -m -c`` of one port) for ports of FABRIC, or (without ``--file``) read the fabric's cables
now with its cable info tool (``fabric.services.cables``). Prints a JSON summary as the last line;
exit status 1 with a located reason on bad input (nothing stored for that file)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.services.cables import CableInfoError, collect, import_text
from fabric.upload import UploadError, read_output


class Command(BaseCommand):
    help = (
        "Import saved cable outputs (--file: an ibdiagnet2.db_csv, or one mlxlink -m -c output whose "
        "port is --port GUID:PORT or its 'mlxlink -d lid-<LID> -p <port>' first line) or read the "
        "fabric's cables now with its cable info tool (ibdiagnet or mlxlink)."
    )

    def add_arguments(self, parser):
        parser.add_argument("fabric", help="fabric name")
        parser.add_argument("--file", action="append", default=[], help="a saved output (repeatable)")
        parser.add_argument(
            "--format", choices=["db_csv", "mlxlink"], default="", help="the files' format (default: guessed)"
        )
        parser.add_argument("--port", default="", help="GUID:PORT an mlxlink output is of")

    def handle(self, *args, **opts):
        fabric = Fabric.objects.filter(name=opts["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric named {opts['fabric']!r}")
        if not opts["file"]:
            out = collect(fabric)
            self.stdout.write(json.dumps(out))
            if "skipped" in out:
                raise CommandError(f"not collected: no cable data: {out['skipped']}")
            if "failed" in out and isinstance(out["failed"], str):
                raise CommandError(f"not collected: {out['failed']}")
            return
        imported, failed = [], []
        for name in opts["file"]:
            try:
                text = read_output(name)
                imported.append(
                    import_text(fabric, text, source_name=name, fmt=opts["format"], port=opts["port"])
                )
            except OSError as exc:
                failed.append(f"{name}: {exc.strerror or exc}")
            except (UploadError, CableInfoError) as exc:
                failed.append(str(exc))
        for why in failed:
            self.stderr.write(why)
        for done in imported:
            for why in done["unmatched"] + done["problems"]:
                self.stderr.write(f"{done['file']}: {why}")
        self.stdout.write(json.dumps({"imported": imported, "failed": len(failed)}))
        if failed:
            raise CommandError(f"{len(failed)} of {len(opts['file'])} files not imported")
