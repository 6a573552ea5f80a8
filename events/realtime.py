"""Publishing alarm changes over Channels (producer side; ``events.consumers`` relays them).

Groups: ``core.realtime.group_name("alarms", fabric_id)`` and ``group_name("alarms", "all")``;
message type ``alarm.changed`` with payload ``{"action": "new"|"changed"|"cleared", "alarm":
events.payloads.alarm_payload(...)}``, or ``alarms.reload`` (``{"fabric": id}``) when more than
:data:`MAX_PER_MESSAGE_BURST` alarms changed at once (the page then reloads its list).
The dashboard listens to the same groups (``summary.changed`` after each sweep and discovery);
so does the network map (``static/fabric/map/``), which recolours its cables after ``link.*``/``port.*``
alarm changes and discoveries.
"""

from __future__ import annotations

from core.realtime import group_name, publish

from .payloads import alarm_payload

MAX_PER_MESSAGE_BURST = 50


def _groups(fabric_id) -> list[str]:
    groups = [group_name("alarms", "all")]
    if fabric_id is not None:
        groups.append(group_name("alarms", fabric_id))
    return groups


def publish_alarm_changes(outcome) -> None:
    """Publish the alarms an evaluation opened, updated and cleared (best effort)."""
    changes = (
        [("new", a) for a in outcome.raised]
        + [("changed", a) for a in outcome.updated if a not in outcome.cleared]
        + [("cleared", a) for a in outcome.cleared]
    )
    groups = _groups(outcome.fabric_id)
    if not changes:
        return
    if len(changes) > MAX_PER_MESSAGE_BURST:
        for group in groups:
            publish(group, "alarms.reload", {"fabric": outcome.fabric_id, "changes": len(changes)})
        return
    payloads = [{"action": action, "alarm": alarm_payload(alarm)} for action, alarm in changes]
    for group in groups:
        for payload in payloads:
            publish(group, "alarm.changed", payload)


def publish_summary_changed(fabric_id, source: str = "") -> None:
    """Tell dashboards of ``fabric_id`` to refresh (after a sweep or discovery).

    Payload ``{"fabric": id, "source": "sweep" | "discovery" | "devices" | ""}``: the open map
    refreshes its cables after a discovery's rules ran (its port states and ``link.*`` alarms are
    then stored), and its Ethernet layer after ``devices`` (``devices.maplayer.announce``: an SNMP
    poll or a device change altered it), not after every sweep."""
    for group in _groups(fabric_id):
        publish(group, "summary.changed", {"fabric": fabric_id, "source": source})
