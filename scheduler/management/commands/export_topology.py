"""``manage.py export_topology --fabric NAME --format FORMAT [--nodes FILE]``: print a topology
export (``scheduler.exports``) of stored fabrics."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.errors import LocatedError
from fabric.models import Fabric
from scheduler.exports import FORMATS, ExportError, read_node_list
from scheduler.services.topology_export import export_fabrics


class Command(BaseCommand):
    help = (
        "Print the fabric topology for another scheduler: Slurm topology.conf (slurm-tree, slurm-block), "
        "Slurm 25.05 topology.yaml (slurm-yaml), Kubernetes node labels (labels), a Kueue Topology "
        "(kueue), Volcano HyperNodes (volcano) or a KAI Topology (kai). The file goes to stdout, "
        "warnings (hosts the scheduler does not know, nodes no fabric has) to stderr."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--fabric", action="append", required=True,
            help="fabric name (repeat, or comma-separate, for several fabrics in one file)",
        )  # fmt: skip
        parser.add_argument("--format", required=True, choices=FORMATS, dest="fmt")
        parser.add_argument(
            "--nodes",
            help="the scheduler's node list (host-list expressions, one or more a line, or slurm.conf "
            "NodeName= lines; '-' reads stdin): only these nodes are written",
        )
        parser.add_argument("--name", default="weft", help="topology/object name prefix (default weft)")

    def handle(self, *args, fabric, fmt, nodes, name, **opts):
        names = [n.strip() for value in fabric for n in value.split(",") if n.strip()]
        if not names:
            raise CommandError("--fabric needs a fabric name")
        node_set = None
        if nodes:
            try:
                text = sys.stdin.read() if nodes == "-" else Path(nodes).read_text()
            except OSError as exc:
                raise CommandError(f"cannot read the node list {nodes}: {exc.strerror or exc}") from None
            try:
                node_set = read_node_list(text, "<stdin>" if nodes == "-" else nodes)
            except LocatedError as exc:
                raise CommandError(f"bad node list: {exc}") from None
        found = dict(Fabric.objects.filter(name__in=names).values_list("name", "pk"))
        missing = [n for n in names if n not in found]
        if missing:
            known = ", ".join(Fabric.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no fabric {', '.join(repr(n) for n in missing)}; fabrics: {known}")
        # the tree of the fabrics asked for (a host name another fabric also has is said, and
        # exported for these: scheduler.services.topology_export)
        fabrics = list(Fabric.objects.filter(pk__in=found.values()).order_by("pk"))
        try:
            result, notes = export_fabrics(fabrics, fmt, nodes=node_set, name=name)
        except ExportError as exc:
            notes = getattr(exc, "notes", [])
            raise CommandError(f"{exc}" + (f" ({'; '.join(notes)})" if notes else "")) from None
        for w in notes + result.warnings:
            self.stderr.write(f"warning: {w}")
        self.stdout.write(result.text, ending="")
