"""``manage.py import_partitions PATH --fabric NAME [--replace]``: import an OpenSM partitions.conf."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.parsers.partitions import PartitionsParseError
from fabric.services.partitions import MERGE, REPLACE, PartitionError, import_partitions
from fabric.upload import UploadError, read_limited


class Command(BaseCommand):
    help = (
        "Import an OpenSM partitions.conf into a fabric's partitions (merge by PKey; --replace also "
        "deletes the partitions the file lacks); prints a JSON summary as the last line. Pools' and "
        "jobs' partitions are kept as they are (listed in 'kept'); a file that would change one, or "
        "that OpenSM would reject, is refused with file:line and nothing is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="partitions.conf")
        parser.add_argument("--fabric", required=True, help="fabric name")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="delete stored partitions not in the file (a pool's or a job's partition is kept)",
        )

    def handle(self, *args, **opts):
        path = Path(opts["path"])
        try:
            fabric = Fabric.objects.get(name=opts["fabric"])
        except Fabric.DoesNotExist:
            raise CommandError(f"no fabric {opts['fabric']!r}") from None
        try:
            with path.open("rb") as fh:
                data = read_limited(fh, str(path))
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror or exc}") from None
        except UploadError as exc:
            raise CommandError(str(exc)) from exc
        text = data.decode("utf-8", "replace")
        try:
            summary = import_partitions(
                fabric, text, source=str(path), mode=REPLACE if opts["replace"] else MERGE
            )
        except (PartitionsParseError, PartitionError) as exc:
            raise CommandError(str(exc)) from exc
        for w in summary.warnings[:20]:
            self.stderr.write(f"{path}:{w['line']}: warning: {w['message']}")
        if summary.kept:
            self.stderr.write(
                f"kept {len(summary.kept)} partition(s) owned by a pool or a job, unchanged: "
                f"{', '.join(summary.kept)} (change them through their pool or job)"
            )
        out = summary.as_dict()
        out["warnings"] = len(summary.warnings)
        self.stdout.write(json.dumps(out))
