"""``manage.py cable_info FABRIC [--file FILE ... [--format db_csv|mlxlink] [--port GUID:PORT]]``:
import saved cable and transceiver outputs (an ibdiagnet2 ``db_csv`` with ``CABLE_INFO``, or
``mlxlink -m -c`` of one port) for ports of FABRIC, or (without ``--file``) read the fabric's cables
now with its cable info tool (``fabric.services.cables``). Prints a JSON summary as the last line;
exit status 1 with a located reason on bad input (nothing stored for that file)."""

from __future__ import annotations

from fabric.services.cables import CableInfoError, collect, import_text

from ..readings import ReadingCommand


class Command(ReadingCommand):
    help = (
        "Import saved cable outputs (--file: an ibdiagnet2.db_csv, or one mlxlink -m -c output whose "
        "port is --port GUID:PORT or its 'mlxlink -d lid-<LID> -p <port>' first line) or read the "
        "fabric's cables now with its cable info tool (ibdiagnet or mlxlink)."
    )
    error = CableInfoError

    def add_file_arguments(self, parser):
        super().add_file_arguments(parser)
        parser.add_argument(
            "--format", choices=["db_csv", "mlxlink"], default="", help="the files' format (default: guessed)"
        )
        parser.add_argument("--port", default="", help="GUID:PORT an mlxlink output is of")

    def collect(self, fabric):
        return collect(fabric)

    def collect_refusal(self, out):
        if "skipped" in out:
            return f"not collected: no cable data: {out['skipped']}"
        if isinstance(out.get("failed"), str):  # the one ibdiagnet run gave nothing
            return f"not collected: {out['failed']}"
        return None

    def import_file(self, fabric, name, text, opts):
        return import_text(fabric, text, source_name=name, fmt=opts["format"], port=opts["port"])

    def file_warnings(self, done):
        return done["unmatched"] + done["problems"]
