"""The fabric's reference topology and the compare report (``fabric.compare``).

An Admin sets the reference from the fabric's latest discovery (what the database holds now: a
``Discovery`` keeps counts and a diff, not the whole topology, so only the latest one can be
taken) or from a topology file (any format ``fabric.parsers.detect_and_parse`` reads, e.g. the
cabling plan as ``ibnetdiscover`` output). Each change is one transaction with its audit entry
(``topology.reference_set`` / ``topology.reference_events``).

With ``raise_events`` on, :func:`compare_after_discovery` (queued by ``fabric.signals`` after
each committed discovery) records ``topology.mismatch`` (with the counts) when the differences
change, and ``topology.matches`` (which clears it) when the fabric matches again.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from accounts import audit
from events.services import EventSpec, record_events

from ..compare import compare, snapshot_from_topology
from ..models import Discovery, Fabric, Link, TopologyReference
from ..parsers import detect_and_parse
from ..parsers.records import TopologyParseError


class ReferenceRefused(ValueError):
    """The reference cannot be set this way (the message says why; a 409/400 for the user)."""


class ReplaceNotConfirmed(ReferenceRefused):
    """The fabric has a reference already and the caller did not confirm replacing it (a 400:
    the page's "replace the reference" box). Setting the first reference needs no confirmation."""


def fabric_snapshot(fabric: Fabric) -> dict[str, Any]:
    """The fabric's topology as stored now, as a ``fabric.compare`` snapshot (two queries)."""
    nodes = {
        guid: {"name": name or guid, "type": node_type}
        for guid, name, node_type in fabric.nodes.values_list("node_guid", "name", "node_type")
    }
    links = [
        {"a": [ga, pa], "b": [gb, pb], "width": width, "speed": speed}
        for ga, pa, gb, pb, width, speed in Link.objects.filter(fabric=fabric).values_list(
            "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num",
            "width", "speed",
        )
    ]  # fmt: skip
    return {"nodes": nodes, "links": links}


def _save(
    fabric: Fabric, snapshot: dict, *, discovery=None, filename: str = "", user=None, replace: bool = True
) -> TopologyReference:
    with transaction.atomic():
        ref, created = TopologyReference.objects.select_for_update().get_or_create(fabric=fabric)
        if not created and not replace:  # checked under the row lock: two first setters, one wins
            raise ReplaceNotConfirmed(
                f"{fabric.name} has a reference already ({ref.source_label}): confirm replacing it"
            )
        ref.snapshot, ref.discovery, ref.filename = snapshot, discovery, filename
        ref.created_by = getattr(user, "username", "") or ""
        ref.last_counts = {}
        ref.save()
        audit.record(
            "topology.reference_set",
            fabric,
            {"source": ref.source_label, "nodes": ref.counts["nodes"], "links": ref.counts["links"]},
            user=user,
        )
    return ref


def set_reference_from_discovery(
    fabric: Fabric, discovery: Discovery, user=None, *, replace: bool = True
) -> TopologyReference:
    """Make the fabric's latest discovery (the topology stored now) its reference; with
    ``replace=False`` only when the fabric has none yet.

    Raises:
        ReferenceRefused: ``discovery`` is not the fabric's latest complete one.
        ReplaceNotConfirmed: ``replace=False`` and the fabric has a reference (nothing written).
    """
    if discovery.fabric_id != fabric.pk or fabric.last_discovery_id != discovery.pk:
        raise ReferenceRefused(
            f"discovery #{discovery.pk} is not the latest of {fabric.name}: Weft keeps the topology of the "
            "latest discovery only (older ones are kept as diffs)"
        )
    if discovery.status not in {"ok", "partial"}:
        raise ReferenceRefused(f"discovery #{discovery.pk} did not complete ({discovery.status})")
    return _save(fabric, fabric_snapshot(fabric), discovery=discovery, user=user, replace=replace)


def set_reference_from_text(
    fabric: Fabric, text: str, filename: str, user=None, *, replace: bool = True
) -> TopologyReference:
    """Make the topology in ``text`` (a file named ``filename``) the fabric's reference; with
    ``replace=False`` only when the fabric has none yet.

    Raises:
        TopologyParseError: not a topology, or cut short (located: file, line); nothing is written.
        ReplaceNotConfirmed: ``replace=False`` and the fabric has a reference (nothing written).
    """
    topo = detect_and_parse(text, filename or "<upload>")
    if topo.truncated:
        line, reason = topo.truncated
        raise TopologyParseError(f"{reason}: the file looks cut short", source=filename, line=line)
    return _save(fabric, snapshot_from_topology(topo), filename=filename, user=user, replace=replace)


def set_raise_events(fabric: Fabric, on: bool, user=None) -> TopologyReference:
    """Turn the after-discovery compare events on or off (audited).

    Raises:
        ReferenceRefused: the fabric has no reference yet."""
    with transaction.atomic():
        ref = TopologyReference.objects.select_for_update().filter(fabric=fabric).first()
        if ref is None:
            raise ReferenceRefused(f"{fabric.name} has no reference topology yet: set one first")
        ref.raise_events = on
        ref.last_counts = {}
        ref.save(update_fields=["raise_events", "last_counts"])
        audit.record("topology.reference_events", fabric, {"raise_events": on}, user=user)
    return ref


def compare_fabric(fabric: Fabric) -> dict[str, Any] | None:
    """The compare report (``fabric.compare.compare``) of the fabric against its reference, with
    ``"reference"`` = ``{"source", "set", "by", "nodes", "links", "raise_events"}``; None without one."""
    ref = TopologyReference.objects.filter(fabric=fabric).first()
    if ref is None:
        return None
    report = compare(ref.snapshot, fabric_snapshot(fabric))
    report["reference"] = {
        "source": ref.source_label,
        "set": ref.created.isoformat(),
        "by": ref.created_by,
        **ref.counts,
        "raise_events": ref.raise_events,
    }
    return report


def compare_after_discovery(fabric_id: int) -> dict[str, int] | None:
    """Compare a fabric with ``raise_events`` on and record an event when the differences changed
    since the last compare: ``topology.mismatch`` (details: counts) or ``topology.matches``.
    Returns the counts, or None (no such fabric, no reference, events off)."""
    with transaction.atomic():
        ref = (
            TopologyReference.objects.select_for_update()
            .select_related("fabric")
            .filter(fabric_id=fabric_id, raise_events=True)
            .first()
        )
        if ref is None:
            return None
        report = compare(ref.snapshot, fabric_snapshot(ref.fabric))
        counts = report["counts"]
        if counts != ref.last_counts:
            fabric = ref.fabric
            if report["matches"]:
                spec = EventSpec(
                    code="topology.matches",
                    message=f"{fabric.name} matches its reference topology ({ref.source_label})",
                    object_type="fabric", object_key=fabric.name, object_repr=fabric.name, details=counts,
                )  # fmt: skip
            else:
                what = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items() if n)
                spec = EventSpec(
                    code="topology.mismatch",
                    message=f"{fabric.name} differs from its reference topology ({ref.source_label}): {what}",
                    object_type="fabric", object_key=fabric.name, object_repr=fabric.name, details=counts,
                )  # fmt: skip
            # the first compare after events were turned on and the fabric matches: nothing to say
            if not (report["matches"] and not ref.last_counts):
                record_events(fabric, [spec])
            ref.last_counts = counts
            ref.save(update_fields=["last_counts"])
    return counts
