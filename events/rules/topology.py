"""Topology rules, after every discovery or import (``events.receivers`` → ``evaluate_discovery_task``)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from fabric.models import Discovery, Link, Node

from .. import health
from ..engine import AlarmEngine, Outcome, lock_fabric
from ..recording import EventSpec


def evaluate_discovery(fabric_id: int, discovery_id: int | None = None) -> Outcome:
    """Rules after a discovery or import committed.

    Health conditions (duplicate port GUIDs, duplicate LIDs, Active ports with LID 0/0xffff)
    raise or clear alarms (not after a failed discovery, which changed nothing); open
    ``link.down``/``node.removed``/``link.degraded`` alarms whose condition no longer holds in
    the stored topology are cleared. The ingest's topology events and the discovery service's
    ``system.discovery_failing``/``_recovered`` events are applied first; this rule writes no
    discovery status event of its own (one writer: ``fabric.services.discovery``).

    Raises:
        fabric.models.Fabric.DoesNotExist: unknown ``fabric_id``.
    """

    with transaction.atomic():
        fabric = lock_fabric(fabric_id)
        engine = AlarmEngine(fabric)
        engine.process_pending()  # topology events first: link.up clears before conditions look
        discovery = Discovery.objects.filter(pk=discovery_id, fabric=fabric).first() if discovery_id else None
        specs: list[EventSpec] = []
        if discovery is None or discovery.status != "failed":
            specs += _health_conditions(engine, health.topology_findings(fabric))
            _clear_stale_topology_alarms(engine, fabric)
        engine.write_events(specs)
        engine.expire(timezone.now())
        return engine.finish()


_HEALTH_ALARM_CODES = {
    "duplicate_guid": "health.duplicate_guid",
    "duplicate_lid": "health.duplicate_lid",
    "invalid_lid": "health.invalid_lid",
}


def _health_conditions(engine: AlarmEngine, findings) -> list[EventSpec]:
    specs: list[EventSpec] = []
    for check, code in _HEALTH_ALARM_CODES.items():
        measured = {f.object_key: (True, None, f.as_dict()) for f in findings if f.check == check}
        by_key = {f.object_key: f for f in findings if f.check == check}

        def describe(key, over, value, info, code=code, by_key=by_key):
            finding = by_key.get(key)
            if over and finding is not None:
                return EventSpec(code=code, message=finding.message, category="health",
                                 object_type=finding.object_type, object_key=key,
                                 object_repr=finding.object_repr, details=finding.details)  # fmt: skip
            alarm = engine.open_alarms.get((code, key))
            return EventSpec(code=f"{code}_cleared", category="health",
                             message=f"Resolved: {alarm.message if alarm else key}",
                             object_type=alarm.object_type if alarm else "", object_key=key,
                             object_repr=alarm.object_repr if alarm else key)  # fmt: skip

        specs += engine.conditions(code, measured, describe)
    return specs


def _clear_stale_topology_alarms(engine: AlarmEngine, fabric) -> None:
    """Clear link.down/node.removed alarms the stored topology contradicts, and link.degraded
    alarms of links that are gone.

    The ingest's link.up/node.added events normally clear them; this covers events lost to a
    disabled policy at the time, or an import that rebuilt the fabric.
    """

    now = timezone.now()
    codes = {"link.down", "node.removed", "link.degraded"}
    candidates = [a for (c, _), a in engine.open_alarms.items() if c in codes]
    if not candidates:
        return
    links = {
        health.link_key_of(link)
        for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node")
    }
    nodes = set(Node.objects.filter(fabric=fabric).values_list("node_guid", flat=True))
    for alarm in candidates:
        if alarm.code == "link.down" and alarm.object_key in links:
            engine.clear(alarm, at=now, reason="link present in the latest discovery")
        elif alarm.code == "node.removed" and alarm.object_key in nodes:
            engine.clear(alarm, at=now, reason="node present in the latest discovery")
        elif alarm.code == "link.degraded" and alarm.object_key not in links:
            # Its recovery is the ingest's link.up (rate back up); a link that is gone has link.down.
            engine.clear(alarm, at=now, reason="link no longer present")
