"""``manage.py switch_health FABRIC [--file FILE ... [--switch GUID]]``: import saved
``ibswinfo.sh`` outputs for switches of FABRIC, or (without ``--file``) read every switch now with
``ibswinfo.sh`` (``fabric.services.switchhealth``). Prints a JSON summary as the last line; exit
status 1 with a located reason on bad input (nothing stored for that file)."""

from __future__ import annotations

from fabric.services.switchhealth import SwitchHealthError, collect, import_text

from ..readings import ReadingCommand


class Command(ReadingCommand):
    help = (
        "Import saved ibswinfo.sh outputs (--file, the switch named by the output's GUID line or "
        "--switch) or read every switch of the fabric now with ibswinfo.sh (WEFT_IBSWINFO)."
    )
    error = SwitchHealthError

    def add_file_arguments(self, parser):
        parser.add_argument(
            "--file", action="append", default=[], help="a saved ibswinfo.sh output (repeatable)"
        )
        parser.add_argument(
            "--switch", default="", help="switch node GUID, for outputs without a GUID line (-o vitals)"
        )

    def collect(self, fabric):
        return collect(fabric)

    def import_file(self, fabric, name, text, opts):
        row = import_text(fabric, text, source_name=name, switch_guid=opts["switch"])
        return {"file": name, "switch": str(row.node), "problems": row.data["problems"]}
