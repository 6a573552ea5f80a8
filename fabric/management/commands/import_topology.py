"""``manage.py import_topology PATH [--fabric NAME]``: import a topology file (gzip accepted)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from fabric.models import Fabric
from fabric.parsers.records import TopologyParseError
from fabric.services.ingest import ImportWouldRemove, import_topology_text, summary
from fabric.upload import UploadError, read_limited, topology_text


def read_topology_file(path: Path) -> str:
    """Text of ``path``: gunzipped when it starts with the gzip magic, decoded as UTF-8 (bad bytes
    replaced, so binary junk reaches the parser, which rejects it with a located error); corrupt
    gzip data and files above ``WEFT_IMPORT_MAX_BYTES`` (uncompressed) are refused."""
    try:
        with path.open("rb") as fh:
            return topology_text(read_limited(fh, str(path)), str(path))
    except UploadError as exc:
        raise CommandError(str(exc)) from exc


class Command(BaseCommand):
    help = (
        "Import an ibnetdiscover (also -p, ibdiagnet2, ibsim netfile) or subnet.lst file into a fabric; "
        "prints a JSON summary as the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="topology file (.gz accepted)")
        parser.add_argument("--fabric", help="fabric name (default: the file name without extensions)")
        parser.add_argument("--no-create", action="store_true", help="fail if the fabric does not exist")
        parser.add_argument(
            "--replace",
            action="store_true",
            help="the file is the whole fabric: accept removing more than WEFT_IMPORT_MAX_REMOVE_SHARE of it",
        )

    def handle(self, *args, **opts):
        path = Path(opts["path"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        name = opts["fabric"] or _default_name(path)
        try:  # the API's rule: a slug of at most 64 characters (PostgreSQL refuses longer)
            Fabric._meta.get_field("name").clean(name, None)
        except ValidationError as exc:
            raise CommandError(f"--fabric {name!r}: {' '.join(exc.messages)}") from exc
        text = read_topology_file(path)
        try:
            discovery = import_topology_text(
                name, text, filename=path.name, create=not opts["no_create"], replace=opts["replace"]
            )
        except TopologyParseError as exc:
            raise CommandError(str(exc)) from exc
        except ImportWouldRemove as exc:
            examples = "; ".join(exc.examples[:10])
            raise CommandError(f"{path}: {exc} (--replace). It would remove: {examples}") from exc
        except Fabric.DoesNotExist as exc:  # --no-create
            raise CommandError(str(exc)) from exc
        out = summary(discovery)
        for w in (discovery.warnings or [])[:20]:
            self.stderr.write(f"{path.name}:{w['line']}: warning: {w['message']}")
        self.stdout.write(json.dumps(out))


def _default_name(path: Path) -> str:
    from django.utils.text import slugify

    stem = path.name.split(".")[0]
    return slugify(stem)[:64] or "imported"
