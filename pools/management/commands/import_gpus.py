"""``manage.py import_gpus PATH --host NAME``: store an ``nvidia-smi -q -x`` report as a host's GPUs."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.upload import UploadError, read_limited, topology_text
from pools.choices import ReportSource
from pools.parsers import GpuParseError, parse_gpu_report
from pools.services.inventory import (
    GpuConflict,
    HostNotFound,
    ReportRejected,
    find_host,
    ingest_gpu_report,
    record_conflict,
)


def _read(path: Path) -> str:
    if not path.is_file():
        raise CommandError(f"{path}: no such file")
    try:
        with path.open("rb") as fh:  # same size limit (WEFT_IMPORT_MAX_BYTES) and gzip handling as imports
            return topology_text(read_limited(fh, str(path)), str(path))
    except UploadError as exc:
        raise CommandError(str(exc)) from exc


class Command(BaseCommand):
    help = (
        "Import an nvidia-smi -q -x report (or -q text, or a capture with -q, -L and topo -m) as the GPUs of "
        "a host; prints {host, gpus, mig_slices, warnings} as JSON on the last line. A malformed file is a "
        "located error (file, line, element) and nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="nvidia-smi -q -x output (.gz accepted)")
        parser.add_argument("--host", required=True, help="host name (as in its CAs' NodeDescription)")
        parser.add_argument("--fabric", help="fabric of the host, when several fabrics have that host name")
        parser.add_argument("--topo", help="nvidia-smi topo -m output of the host (NUMA nodes and rails)")
        parser.add_argument(
            "--mig", help="nvidia-smi mig -lgi / -lci output of the host (MIG profiles, placement)"
        )
        parser.add_argument(
            "--move",
            action="store_true",
            help="GPUs of the report stored on another host move to this one (a GPU that really moved); "
            "without it such a report is refused",
        )

    def handle(self, *args, **opts):
        path = Path(opts["path"])
        text = _read(path)
        topo = _read(Path(opts["topo"])) if opts["topo"] else None
        mig = _read(Path(opts["mig"])) if opts["mig"] else None
        try:
            host = find_host(opts["host"], opts["fabric"])
            report = parse_gpu_report(text, source=path.name, topo=topo, mig=mig)
        except (HostNotFound, GpuParseError) as exc:
            raise CommandError(str(exc)) from exc
        try:
            summary = ingest_gpu_report(host, report, source=ReportSource.IMPORT, allow_moves=opts["move"])
        except ReportRejected as exc:
            raise CommandError(str(exc)) from exc
        except GpuConflict as exc:
            record_conflict(exc, source=ReportSource.IMPORT)
            raise CommandError(f"{exc} (--move moves them)") from exc
        for w in summary["warnings"]:
            self.stderr.write(f"warning: {w['where']}: {w['message']}")
        self.stdout.write(json.dumps(summary, sort_keys=True))
