"""Verification: which ports to read after an apply and reading their P_Key tables
(``smpquery pkeys``) until they agree or a bounded wait ends."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ...choices import Membership, NodeType
from ...collectors.pkeys import read_pkeys
from ...collectors.tools import ToolAborted, ToolError, fabric_env
from ...models import Fabric, Partition, Port
from ...parsers.partitions import (
    KEYWORDS,
    PartitionsParseError,
)

log = logging.getLogger(__name__)


def _spread(items: list, n: int) -> list:
    """At most ``n`` items evenly spread over ``items`` (deterministic)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / n
    return [items[int(i * step)] for i in range(n)]


@dataclass
class PortCheck:
    """One port to read in a verification: the partition, the port GUID and the membership it
    must carry (None: it must not carry the PKey)."""

    partition_id: int
    guid: str
    expected: str | None  # membership, or None: must not carry the PKey


def plan_checks(fabric: Fabric, parts: list[Partition], sample: int) -> list[PortCheck]:
    """Ports to verify per partition: up to ``sample`` members the topology knows (GUID members
    only; keyword members say nothing checkable per port) and up to ``sample`` CA ports that are
    not members (skipped when a keyword member covers all ports)."""
    ca_ports = list(
        Port.objects.filter(node__fabric=fabric, node__node_type=NodeType.CA)
        .exclude(port_guid="")
        .order_by("port_guid")
        .values_list("port_guid", flat=True)
    )
    known = set(ca_ports) | set(
        Port.objects.filter(node__fabric=fabric).exclude(port_guid="").values_list("port_guid", flat=True)
    )
    checks: list[PortCheck] = []
    for p in parts:
        if p.is_default:
            continue
        members = {m.port_guid: m.membership for m in p.members.all()}
        on_fabric = sorted(g for g in members if g in known)
        checks += [PortCheck(p.pk, g, members[g]) for g in _spread(on_fabric, sample)]
        if not any(g in KEYWORDS for g in members):
            outside = [g for g in ca_ports if g not in members]
            checks += [PortCheck(p.pk, g, None) for g in _spread(outside, sample)]
    return checks


def _matches(expected: str | None, seen: str | None) -> bool:
    if expected == Membership.BOTH:
        return seen in (Membership.BOTH, Membership.FULL)
    return expected == seen


#: a read is not started with less than this many seconds left before the verification deadline
MIN_READ_S = 0.5


def verify_checks(
    fabric: Fabric, parts: list[Partition], checks: list[PortCheck], timeout: float, *, once: bool = False
) -> tuple[list[dict], list[dict]]:
    """Read the P_Key tables of the checked ports again until all agree or ``timeout`` seconds
    pass; return ``(drift, unverified)``.

    ``drift``: ports whose last read table disagrees (``[{"partition", "pkey", "guid",
    "expected", "seen"}]``, ``seen`` the membership read or None). ``unverified``: ports never
    read successfully before the deadline (``[{"partition", "pkey", "guid", "expected",
    "error"}]``: the tool failed or timed out, or no time was left to read them). Each
    ``smpquery`` run is bounded by the time left until the deadline (at most 15 s), and no read
    starts with less than :data:`MIN_READ_S` left, so a hung tool costs at most ``timeout``
    (plus a process kill), not ``timeout`` per port. ``once``: one round of reads, no waiting for
    agreement (the reconcile observes what is there; an apply waits for OpenSM's sweep).

    Raises:
        ToolAborted: the worker is stopping (:func:`fabric.collectors.tools.abort_all`).
    """
    by_id = {p.pk: p for p in parts}
    env = fabric_env(fabric)
    deadline = time.monotonic() + timeout
    interval = 0.2
    # guid -> the last table read or "error: ..." (what is known of each port so far)
    last: dict[str, object] = {}
    pending = list(checks)
    while True:
        tables: dict[str, object] = {}
        for c in pending:
            if c.guid in tables:
                continue
            left = deadline - time.monotonic()
            if left < MIN_READ_S:
                break  # out of time: the ports not read this round keep what was read before
            try:
                tables[c.guid] = read_pkeys(fabric, c.guid, env=env, timeout=min(15.0, left))
            except ToolAborted:
                raise  # the process is stopping: not a disagreement, and no point waiting out the timeout
            except (ToolError, PartitionsParseError) as exc:
                tables[c.guid] = f"error: {str(exc)[:200]}"
        for guid, table in tables.items():
            if not (isinstance(table, str) and guid in last and not isinstance(last[guid], str)):
                last[guid] = table  # a failed re-read keeps the table read before
        drift, unverified, failed = [], [], []
        for c in pending:
            part = by_id[c.partition_id]
            row = {"partition": part.name, "pkey": part.pkey_hex, "guid": c.guid, "expected": c.expected}
            table = last.get(c.guid)
            if table is None or isinstance(table, str):
                error = (
                    table.removeprefix("error: ") if table else "not read before the verification deadline"
                )
                unverified.append(row | {"error": error})
                failed.append(c)
                continue
            seen = table.membership(part.pkey)
            if not _matches(c.expected, seen):
                drift.append(row | {"seen": seen})
                failed.append(c)
        if once or not failed or deadline - time.monotonic() < MIN_READ_S:
            return drift, unverified
        pending = failed
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 2, 2.0)


def member_counts(fabric: Fabric, parts: list[Partition], drift: list[dict]) -> dict[int, dict]:
    """What an apply or a reconcile can say of each partition's GUID members (keywords are not
    counted: they name no port): ``{partition id: {"members": M, "applied": N, "unverifiable": K,
    "not_in_fabric": [up to 20 GUIDs]}}``. K: GUIDs no port of the fabric has (an SR-IOV virtual
    function's, a host not discovered yet): OpenSM's tables cannot be read for them, so they are
    never counted applied. N: the others less the members ``drift`` names."""
    guids = {m.port_guid for p in parts for m in p.members.all() if m.port_guid not in KEYWORDS}
    known: set[str] = set()
    ordered = sorted(guids)
    for i in range(0, len(ordered), 500):
        known.update(
            Port.objects.filter(node__fabric=fabric, port_guid__in=ordered[i : i + 500]).values_list(
                "port_guid", flat=True
            )
        )
    out: dict[int, dict] = {}
    for p in parts:
        mine = sorted(m.port_guid for m in p.members.all() if m.port_guid not in KEYWORDS)
        missing = [g for g in mine if g not in known]
        drifting = {d["guid"] for d in drift if d.get("pkey") == p.pkey_hex and d.get("expected")}
        out[p.pk] = {
            "members": len(mine),
            "applied": len(mine) - len(missing) - len(drifting & set(mine)),
            "unverifiable": len(missing),
            "not_in_fabric": missing[:20],
        }
    return out
