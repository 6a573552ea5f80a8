"""The one writer of routing snapshots: read every switch's LFT, store it when it changed,
raise ``routing.changed`` with the moved LIDs, send ``routes_changed`` on commit.

Reading: the MAD child ``python -m routing.collectors.lftpoll`` (pipelined LID-routed SMPs, the
switch LIDs from the stored topology) in its own process group with the fabric's tool
environment; when it cannot run (no umad, a switch that does not answer) the fallback is
``dump_lfts`` (infiniband-diags, directed-route SMPs), parsed by ``routing.parsers``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from events.services import EventSpec, record_events
from fabric.choices import NodeType
from fabric.collectors.tools import ToolError, fabric_ca_args, fabric_env, run_process, run_tool
from fabric.models import NO_LIVE_ACCESS, Fabric, Node

from ..collectors import lftpoll
from ..models import RouteSource, RoutingSnapshot, SwitchRoute
from ..parsers import UNASSIGNED, LftParseError, parse_dump_lfts

#: The project root: the lftpoll child imports ``routing``/``fabric`` from it (its cwd is the tool
#: work directory, where umad2sim writes its ``sys-<pid>`` tree).
ROOT = Path(__file__).resolve().parents[2]
#: Snapshots kept per fabric (older ones are deleted when a new one is stored).
KEEP_SNAPSHOTS = 20


class RoutesError(RuntimeError):
    """The tables could not be read by either way (the message says why, for each)."""


def table_digest(lft: bytes) -> str:
    """16 hex digits (BLAKE2b-64) of one LFT, trailing unassigned entries ignored (a table read
    up to LinearFDBTop and one printed by ``dump_lfts`` up to its last LID are the same table)."""
    return hashlib.blake2b(lft.rstrip(bytes([UNASSIGNED])), digest_size=8).hexdigest()


def snapshot_digest(digests: dict[str, str]) -> str:
    """32 hex digits over every ``(switch GUID, table digest)``, sorted by GUID."""
    h = hashlib.blake2b(digest_size=16)
    for guid in sorted(digests):
        h.update(f"{guid}={digests[guid]};".encode())
    return h.hexdigest()


def moved_lids(old: bytes, new: bytes) -> int:
    """Destination LIDs whose entry differs between two tables (a LID beyond a table's end is
    unassigned there)."""
    n = max(len(old), len(new))
    a = old.ljust(n, bytes([UNASSIGNED]))
    b = new.ljust(n, bytes([UNASSIGNED]))
    return sum(1 for x, y in zip(a, b, strict=True) if x != y)


def _lftpoll(fabric: Fabric, lids: list[int], timeout: float) -> list[tuple[int, int, int, bytes]]:
    """One lftpoll run: its records for ``lids``. Raises ToolError (failed, timed out, cut output)."""
    argv = [sys.executable, "-m", "routing.collectors.lftpoll", *fabric_ca_args(fabric),
            "--timeout", str(settings.WEFT_MAD_TIMEOUT_S)]  # fmt: skip
    env = fabric_env(fabric)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    try:
        proc = run_process(argv, input="".join(f"{lid}\n" for lid in lids).encode(), env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ToolError(f"lftpoll did not finish within {timeout:g} s (killed)") from None
    if proc.returncode != 0:
        said = proc.stderr.decode("utf-8", "replace").strip()[-300:]
        raise ToolError(f"lftpoll failed (exit {proc.returncode}): {said}")
    try:
        records = lftpoll.decode(proc.stdout)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if len(records) != len(lids):
        raise ToolError(f"lftpoll answered {len(records)} of {len(lids)} switches")
    return records


def read_by_mad(
    fabric: Fabric, switches: list[tuple[str, int]], timeout: float
) -> dict[str, tuple[int, bytes]]:
    """``{switch GUID: (LID, LFT)}`` read by the lftpoll child for ``switches`` (``(GUID, LID)``).
    Switches whose SMPs timed out are asked once more (a second run for just them: a busy switch
    or SM sweep), as ``dump_lfts`` retries its MADs.

    Raises:
        ToolError: the child failed or timed out, a switch's tables could not be read twice, or a
            LID is another node's now (the stored topology is stale).
    """
    out: dict[str, tuple[int, bytes]] = {}
    todo = switches
    for attempt in (1, 2):
        t0 = time.monotonic()
        records = _lftpoll(fabric, [lid for _g, lid in todo], timeout)
        timeout = max(1.0, timeout - (time.monotonic() - t0))
        again = []
        for (guid, lid), (_lid, status, read_guid, table) in zip(todo, records, strict=True):
            if status == lftpoll.STATUS_TIMEOUT and attempt == 1:
                again.append((guid, lid))
                continue
            if status != lftpoll.STATUS_OK:
                why = "timed out" if status == lftpoll.STATUS_TIMEOUT else "answered an error"
                raise ToolError(f"the LFT of switch {guid} (LID {lid}) was not read: an SMP {why}")
            if f"0x{read_guid:016x}" != guid:  # the SM gave the LID to another node since the discovery
                raise ToolError(
                    f"LID {lid} is node 0x{read_guid:016x} now, not switch {guid} (stale topology)"
                )
            out[guid] = (lid, table)
        if not again:
            break
        todo = again
    return out


def read_by_dump_lfts(fabric: Fabric, timeout: float) -> dict[str, tuple[int | None, bytes]]:
    """``{switch GUID: (LID, LFT)}`` from ``dump_lfts`` output.

    Raises:
        ToolError: the tool is missing, failed, timed out, or printed what the parser refuses.
    """
    res = run_tool(["dump_lfts", *fabric_ca_args(fabric)], env=fabric_env(fabric), timeout=timeout)
    if res.returncode != 0:
        raise ToolError(
            f"dump_lfts failed (exit {res.returncode}): {(res.stderr or res.stdout).strip()[-300:]}"
        )
    try:
        return {s.node_guid: (s.lid, s.lft) for s in parse_dump_lfts(res.stdout)}
    except LftParseError as exc:
        raise ToolError(str(exc)) from None


def read_tables(
    fabric: Fabric, *, use_mad: bool = True
) -> tuple[str, dict[str, tuple[int | None, bytes]], list[str]]:
    """Read the tables: ``(source, {GUID: (LID, LFT)}, warnings)``; MAD first, ``dump_lfts`` when
    that fails (its reason becomes a warning).

    Raises:
        RoutesError: neither way worked (both reasons in the message).
    """
    timeout = float(settings.WEFT_TOOL_TIMEOUT_S)
    warnings: list[str] = []
    switches = list(
        Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH, lid__gt=0)
        .order_by("lid")
        .values_list("node_guid", "lid")
    )
    if use_mad and switches:
        try:
            return RouteSource.MAD, read_by_mad(fabric, switches, timeout), warnings
        except (ToolError, OSError) as exc:
            warnings.append(f"SMP read failed, used dump_lfts: {exc}")
    try:
        return RouteSource.DUMP_LFTS, read_by_dump_lfts(fabric, timeout), warnings
    except (ToolError, OSError) as exc:
        raise RoutesError("; ".join([*warnings, f"dump_lfts: {exc}"])) from None


def collect_routes(fabric: Fabric, *, reason: str = "manual", use_mad: bool = True) -> RoutingSnapshot:
    """Read ``fabric``'s forwarding tables and store them when they changed.

    Returns the latest snapshot: a new one (with ``moved`` against the previous, a
    ``routing.changed`` event when there was a previous one, ``routes_changed`` sent on commit),
    or the previous one with ``checked`` moved to now when the digest is the same.

    Raises:
        RoutesError: the fabric has no live access (imported from a file: the diags would read
            another fabric), or the tables could not be read (nothing is written).
    """
    if not fabric.has_live_access:
        raise RoutesError(NO_LIVE_ACCESS.format(name=fabric.name))
    t0 = time.monotonic()
    source, tables, warnings = read_tables(fabric, use_mad=use_mad)
    duration = round(time.monotonic() - t0, 4)
    digests = {g: table_digest(lft) for g, (_lid, lft) in tables.items()}
    digest = snapshot_digest(digests)
    now = timezone.now()
    with transaction.atomic():
        Fabric.objects.select_for_update().filter(pk=fabric.pk).first()  # one writer per fabric
        prev = RoutingSnapshot.objects.filter(fabric=fabric).order_by("-taken", "-pk").first()
        if prev is not None and prev.digest == digest:
            RoutingSnapshot.objects.filter(pk=prev.pk).update(checked=now)
            prev.checked = now
            return prev
        moved: dict[str, Any] = {}
        if prev is not None:
            old = {r.node_guid: (r.digest, bytes(r.lft)) for r in prev.switch_routes.all()}
            per: dict[str, int] = {}
            for g, (_lid, lft) in tables.items():
                od = old.get(g)
                if od is None or od[0] != digests[g]:
                    n = moved_lids(od[1] if od else b"", lft)
                    if n:
                        per[g] = n
            gone = sorted(set(old) - set(tables))
            moved = {"lids": sum(per.values()), "switches": per, "switches_gone": gone}
        snap = RoutingSnapshot.objects.create(
            fabric=fabric, taken=now, checked=now, source=source, reason=reason[:16], digest=digest,
            switches=len(tables), duration_s=duration, moved=moved, warnings=warnings,
        )  # fmt: skip
        SwitchRoute.objects.bulk_create(
            [
                SwitchRoute(snapshot=snap, node_guid=g, lid=lid, lft=lft, digest=digests[g])
                for g, (lid, lft) in sorted(tables.items())
            ],  # fmt: skip
            batch_size=500,
        )
        if prev is not None:
            names = dict(Node.objects.filter(fabric=fabric, node_guid__in=list(moved["switches"])).values_list("node_guid", "name"))  # fmt: skip
            top = sorted(moved["switches"].items(), key=lambda kv: -kv[1])[:5]
            listed = ", ".join(f"{names.get(g) or g} {n}" for g, n in top)
            record_events(
                fabric,
                [EventSpec("routing.changed",
                           f"Routes changed: {moved['lids']} destination LIDs moved on "
                           f"{len(moved['switches'])} switches" + (f" ({listed})" if listed else ""),
                           object_type="fabric", object_key=fabric.name, object_repr=fabric.name,
                           details={"snapshot": snap.pk, "previous": prev.pk, **moved})],
            )  # fmt: skip
        stale = list(
            RoutingSnapshot.objects.filter(fabric=fabric)
            .order_by("-taken", "-pk")
            .values_list("pk", flat=True)[KEEP_SNAPSHOTS:]
        )
        if stale:
            RoutingSnapshot.objects.filter(pk__in=stale).delete()
        # the stored report is the latest snapshot's only (routing.services.current)
        RoutingSnapshot.objects.filter(fabric=fabric).exclude(pk=snap.pk).exclude(report={}).update(
            report={}, report_topology=None
        )
        transaction.on_commit(lambda: _send_changed(fabric.pk, snap.pk, moved))
    return snap


def _send_changed(fabric_id: int, snapshot_id: int, moved: dict) -> None:
    from ..signals import routes_changed

    routes_changed.send(sender=RoutingSnapshot, fabric_id=fabric_id, snapshot_id=snapshot_id, moved=moved)


def summary(snap: RoutingSnapshot) -> dict[str, Any]:
    """The JSON summary of a snapshot (commands, tasks)."""
    return {
        "fabric": snap.fabric.name,
        "snapshot": snap.pk,
        "taken": snap.taken.isoformat(),
        "checked": snap.checked.isoformat(),
        "source": snap.source,
        "switches": snap.switches,
        "digest": snap.digest,
        "duration_s": snap.duration_s,
        "moved_lids": (snap.moved or {}).get("lids", 0),
        "warnings": snap.warnings,
    }
