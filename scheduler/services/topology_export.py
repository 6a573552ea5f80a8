"""The topology export of named fabrics (``manage.py export_topology``, ``GET
/api/scheduler/topology/``): the locality of those fabrics, the notes a person should read, and
the export (``scheduler.exports``, pure).

The locality is built from the named fabrics only. Weft's own scheduler places a host name found
on several fabrics on one of them (``scheduler.topology``, rule 5), but an export is for the
scheduler of the fabrics named: two sites with the same host names, or a storage fabric reaching
the compute hosts, must not lose their hosts to a fabric that was not asked for. Such host names
are said instead (:func:`shared_host_names`), per other fabric.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from fabric.models import Fabric, Host

from ..exports import FORMATS, Export, ExportError, export, notes_for
from ..topology import build_locality

#: host names listed in a clash note at most
NOTE_NAMES = 10


def shared_host_names(fabrics: Sequence[Fabric]) -> dict[tuple[str, str], list[str]]:
    """``{(named fabric, other fabric): sorted host names}``: the hosts (with at least one node) of
    each of ``fabrics`` whose name a host of a fabric not in ``fabrics`` also has."""
    ids = [f.pk for f in fabrics]
    mine = (
        Host.objects.filter(fabric_id__in=ids, nodes__isnull=False)
        .values_list("name", "fabric__name")
        .distinct()
    )
    named: dict[str, set[str]] = defaultdict(set)
    for host, fname in mine:
        named[host].add(fname)
    others = (
        Host.objects.filter(name__in=list(named), nodes__isnull=False)
        .exclude(fabric_id__in=ids)
        .values_list("name", "fabric__name")
        .distinct()
    )
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for host, other in others:
        for fname in named[host]:
            out[(fname, other)].append(host)
    return {k: sorted(v) for k, v in sorted(out.items())}


def export_fabrics(
    fabrics: Sequence[Fabric], fmt: str, *, nodes: set[str] | None = None, name: str = "weft"
) -> tuple[Export, list[str]]:
    """``(export, notes)`` of ``fabrics`` in ``fmt`` (see :func:`scheduler.exports.export`);
    ``notes``: the locality's warnings about those fabrics, then one per other fabric sharing host
    names with them (the hosts are exported for the named fabric all the same).

    Raises:
        scheduler.exports.ExportError: unknown format, or no host of those fabrics to write (the
            notes are then on the error's ``notes`` attribute).
    """
    fabrics = list({f.pk: f for f in fabrics}.values())  # a fabric named twice is one
    locality = build_locality(fabrics)
    names = [f.name for f in fabrics]
    notes = notes_for(locality.warnings, names)
    for (mine, other), hosts in shared_host_names(fabrics).items():
        shown = ", ".join(hosts[:NOTE_NAMES]) + (
            f" and {len(hosts) - NOTE_NAMES} more" if len(hosts) > NOTE_NAMES else ""
        )
        notes.append(
            f"{len(hosts)} hosts of fabric {mine} have the same names as hosts of fabric {other} "
            f"(two sites, or a storage fabric?): exported here as fabric {mine}'s: {shown}"
        )
    try:
        result = export(locality, fmt, fabric_ids=[f.pk for f in fabrics], nodes=nodes, name=name)
    except ExportError as exc:
        exc.notes = notes
        raise
    return result, notes


#: the name of each format's file as a download offers it (``{fabric}`` the fabric's name made
#: safe for a file name): Slurm reads ``topology.conf``/``topology.yaml``, the Kubernetes formats
#: are manifests applied with ``kubectl apply -f``
FILENAMES = {
    "slurm-tree": "{fabric}-topology.conf",
    "slurm-block": "{fabric}-topology-block.conf",
    "slurm-yaml": "{fabric}-topology.yaml",
    "kueue": "{fabric}-kueue-topology.yaml",
    "volcano": "{fabric}-volcano-hypernodes.yaml",
    "kai": "{fabric}-kai-topology.yaml",
    "labels": "{fabric}-node-labels.yaml",
}
assert set(FILENAMES) == set(FORMATS)


def export_filename(fabrics: Sequence[Fabric], fmt: str) -> str:
    """The download's file name of ``fmt`` for ``fabrics`` (:data:`FILENAMES`; their names joined
    by ``+``, characters other than letters, digits, ``.``, ``_`` and ``-`` as ``_``)."""
    safe = "+".join(
        "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in f.name) for f in fabrics
    )
    return FILENAMES[fmt].format(fabric=safe or "fabric")


def export_text(result: Export, notes: list[str]) -> tuple[str, list[str]]:
    """``(file text, warnings)``: the export's text with its warnings (``notes`` then the export's
    own) as ``# warning:`` comment lines at the top, one line each (``#`` starts a comment in
    ``topology.conf`` and in YAML), as the API and the fabric page's download serve it."""
    warnings = notes + result.warnings
    head = "".join(f"# warning: {' '.join(w.split())}\n" for w in warnings)
    return head + result.text, warnings
