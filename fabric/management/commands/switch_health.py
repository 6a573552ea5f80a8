"""``manage.py switch_health FABRIC [--file FILE ... [--switch GUID]]``: import saved
``ibswinfo.sh`` outputs for switches of FABRIC, or (without ``--file``) read every switch now with
``ibswinfo.sh`` (``fabric.services.switchhealth``). Prints a JSON summary as the last line; exit
status 1 with a located reason on bad input (nothing stored for that file)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.services.switchhealth import SwitchHealthError, collect, import_text
from fabric.upload import UploadError, read_output


class Command(BaseCommand):
    help = (
        "Import saved ibswinfo.sh outputs (--file, the switch named by the output's GUID line or "
        "--switch) or read every switch of the fabric now with ibswinfo.sh (WEFT_IBSWINFO)."
    )

    def add_arguments(self, parser):
        parser.add_argument("fabric", help="fabric name")
        parser.add_argument(
            "--file", action="append", default=[], help="a saved ibswinfo.sh output (repeatable)"
        )
        parser.add_argument(
            "--switch", default="", help="switch node GUID, for outputs without a GUID line (-o vitals)"
        )

    def handle(self, *args, **opts):
        fabric = Fabric.objects.filter(name=opts["fabric"]).first()
        if fabric is None:
            raise CommandError(f"no fabric named {opts['fabric']!r}")
        if not opts["file"]:
            out = collect(fabric)
            self.stdout.write(json.dumps(out))
            if "skipped" in out:
                raise CommandError(f"not collected: {out['skipped']}")
            return
        imported, failed = [], []
        for name in opts["file"]:
            try:
                text = read_output(name)
                row = import_text(fabric, text, source_name=name, switch_guid=opts["switch"])
            except OSError as exc:
                failed.append(f"{name}: {exc.strerror or exc}")
                continue
            except (UploadError, SwitchHealthError) as exc:
                failed.append(str(exc))
                continue
            imported.append({"file": name, "switch": str(row.node), "problems": row.data["problems"]})
        for why in failed:
            self.stderr.write(why)
        self.stdout.write(json.dumps({"imported": imported, "failed": len(failed)}))
        if failed:
            raise CommandError(f"{len(failed)} of {len(opts['file'])} files not imported")
