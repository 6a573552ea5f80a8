"""The SM service: the one writer of ``SubnetManager`` rows, ``Fabric.master_sm_guid``/``_lid``/
``_missed`` and the ``sm.*`` events.

Three readers feed it what they saw: the SM watch (``fabric.tasks.sm_watch_task``, ``sminfo``
every ``WEFT_SM_WATCH_INTERVAL_S``), the discovery ingest (the SMs of a topology) and the counter
sweep (``sminfo`` beside the collector). Compared with the last known master
(``Fabric.master_sm_guid``):

* another GUID → ``sm.master_changed`` (object ``sm``, key the new master's GUID; the message
  names the old and new master, with node descriptions when the topology knows them);
* no master answer for ``consecutive`` polls of the ``sm.master_lost`` policy (default 1) →
  ``sm.master_lost`` once; an answer afterwards from the same SM → ``sm.master_found``, from
  another → ``sm.master_changed``; both clear the "lost" alarm;
* the first master seen is recorded without an event;
* ``sminfo`` that never reached the subnet (the process timed out on a hung fabric, the local port
  could not be opened, the tool is missing: ``fabric.collectors.sm.MasterProbe.reached`` False)
  says nothing about the SM: ``sm.unreachable`` once (what was seen, the last master), not counted
  as a missed poll; the next probe that reaches the subnet writes ``sm.reachable``, which clears it.

The master's row is set MASTER (priority, ActCount); a previous master's row NOT_ACTIVE (sminfo
does not say what became of it; the next discovery reads the real state). After commit
``fabric.signals.sm_state_changed`` is sent: the events app applies the events, and a fabric
receiver queues a rediscovery when a sweep or the watch saw the master move (a new master may
have handed out new LIDs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from events.models import Event
from events.services import EventSpec, record_events

from ..choices import SMState
from ..collectors.sm import probe_master, read_all_sms
from ..models import Fabric, Node, Port, SubnetManager
from ..parsers.records import SMRecord
from ..signals import sm_state_changed
from .notice_status import notice_status

#: Who observed the SMs (``SMObservation.source`` and the signal's ``source``).
WATCH, DISCOVERY, SWEEP = "watch", "discovery", "sweep"


@dataclass
class SMObservation:
    """What one observation changed: the master seen (None when none answered), the event codes
    written, whether the master moved, the error text of a failed read, whether the probe reached
    the subnet (False: the SM could not be seen from this host), and rows written."""

    fabric: str
    master: SMRecord | None
    source: str = WATCH
    events: list[str] = field(default_factory=list)
    moved: bool = False
    error: str = ""
    rows: int = 0
    reached: bool = True

    @property
    def event(self) -> str:
        """The first event code written, or ""."""
        return self.events[0] if self.events else ""

    def as_dict(self) -> dict:
        """JSON summary (the ``sm_watch`` task's result)."""
        return {
            "fabric": self.fabric,
            "master_guid": self.master.guid if self.master else None,
            "master_lid": self.master.lid if self.master else None,
            "event": self.event,
            "moved": self.moved,
            "error": self.error,
            "reached": self.reached,
        }


def watch(fabric: Fabric, *, timeout: float = 15.0) -> SMObservation:
    """One SM-watch poll of ``fabric``: read the master (``sminfo``) and, when one answers, the
    other SMs (``saquery -s`` + ``sminfo <lid>``; ``fabric.collectors.sm``), then
    :func:`observe_sms`. ``timeout``: seconds per tool run. Tool failures become the observation's
    ``error``, never exceptions; a probe stopped by a worker shutdown records nothing."""
    probe = probe_master(fabric, timeout=timeout)
    if probe.aborted:
        return SMObservation(fabric=fabric.name, master=None, error=probe.error, reached=False)
    master = probe.master
    own = listener_sm_guids(fabric)
    others = (
        [r for r in read_all_sms(fabric, timeout=timeout)[0] if r.guid != master.guid and r.guid not in own]
        if master is not None
        else []
    )
    return observe_sms(
        fabric, master, others=others, error=probe.error, source=WATCH, reached=probe.reached, not_sms=own
    )


def listener_sm_guids(fabric: Fabric) -> set[str]:
    """Port GUIDs of Weft's own notice listener attached as an SM client (ibsim lab only: ibsim
    hands unsolicited MADs to SM clients only, so the listener raises IsSM and answers SMInfo as a
    NOTACTIVE SM, priority 0; ``fabric.collectors.notices``). Its port passes the IsSM rule of
    ``saquery -s`` (PortInfo:CapabilityMask.IsSM, IBTA 14.2.5.6) yet runs no SM: not listed.
    Empty off the lab (a plain umad agent there) and when no listener reported."""
    guid = (notice_status(fabric.pk) or {}).get("sm_client_guid") or ""
    return {guid} if guid else set()


def _name(fabric: Fabric, guid: str) -> str:
    port = Port.objects.filter(node__fabric=fabric, port_guid=guid).select_related("node").first()
    if port is not None:
        return f"{port.node} ({guid})"
    node = Node.objects.filter(fabric=fabric, node_guid=guid).first()
    return f"{node} ({guid})" if node is not None else guid


def _lost_after() -> int:
    # The admin's policy says how many unanswered polls make "lost" (events owns policies).
    from events.policies import policy_for

    return max(1, policy_for("sm.master_lost").consecutive)


def observe_sms(
    fabric: Fabric,
    master: SMRecord | None,
    *,
    others: list[SMRecord] | tuple[SMRecord, ...] = (),
    error: str = "",
    source: str = WATCH,
    at: datetime | None = None,
    reached: bool = True,
    not_sms: set[str] | frozenset[str] = frozenset(),
) -> SMObservation:
    """Record what ``source`` saw of the SMs of ``fabric`` (one transaction, fabric row locked).

    ``master``: the SM answering as MASTER, or None when none answered (``error`` says why; only
    the watch reports that: a discovery or sweep without an SM answer calls nothing). ``reached``:
    False when the probe never got to the subnet (``MasterProbe.reached``): then ``master`` is None
    and the SM's state is unknown, so ``sm.unreachable`` is written (once per episode) instead of
    counting a missed poll. ``others``: standby/discovering SMs (their rows are created or updated;
    never events). ``not_sms``: GUIDs known not to be SMs (:func:`listener_sm_guids`): their rows,
    other than the master's, are deleted. Returns an :class:`SMObservation`; ``sm_state_changed`` is sent on commit.
    """
    at = at or timezone.now()
    result = SMObservation(fabric=fabric.name, master=master, source=source, error=error, reached=reached)
    with transaction.atomic():
        locked = Fabric.objects.select_for_update().get(pk=fabric.pk)
        old_guid, old_lid = locked.master_sm_guid, locked.master_sm_lid
        specs: list[EventSpec] = []
        unreachable_open = _unreachable_open(locked)
        if not reached:
            if not unreachable_open:
                last = (
                    f"last master {_name(locked, old_guid)} lid {old_lid}"
                    if old_guid
                    else "no master known yet"
                )
                specs.append(EventSpec(
                    code="sm.unreachable", object_type="sm", object_key=old_guid or locked.name,
                    object_repr=f"SM of fabric {locked.name}",
                    message=f"The SM of fabric {locked.name} cannot be seen from this host (seen by the "
                            f"{source}): {error}. Its state is unknown ({last}); this is not a lost master.",
                    details={"error": error, "last_master_guid": old_guid, "last_master_lid": old_lid,
                             "source": source},
                ))  # fmt: skip
        elif unreachable_open:
            seen = (f"master {_name(locked, master.guid)} lid {master.lid}" if master is not None
                    else f"no master answers: {error}")  # fmt: skip
            specs.append(EventSpec(
                code="sm.reachable", object_type="sm", object_key=old_guid or locked.name,
                object_repr=f"SM of fabric {locked.name}",
                message=f"The SM of fabric {locked.name} can be seen from this host again: {seen}",
                details={"guid": master.guid if master else None, "lid": master.lid if master else None},
            ))  # fmt: skip
        if master is None and reached:  # asked, and no master answered
            locked.master_sm_missed += 1
            if old_guid and locked.master_sm_missed == _lost_after():
                specs.append(EventSpec(
                    code="sm.master_lost", object_type="sm", object_key=old_guid,
                    object_repr=f"SM {_name(locked, old_guid)}",
                    message=f"No master SM answers on fabric {locked.name} (last master "
                            f"{_name(locked, old_guid)} lid {old_lid}): {error}",
                    details={"last_master_guid": old_guid, "last_master_lid": old_lid, "error": error},
                ))  # fmt: skip
            locked.save(update_fields=["master_sm_missed"])
        elif master is not None:
            was_lost = locked.master_sm_missed >= _lost_after()
            if old_guid and master.guid != old_guid:
                result.moved = True
                specs.append(EventSpec(
                    code="sm.master_changed", object_type="sm", object_key=master.guid,
                    object_repr=f"SM {_name(locked, master.guid)}",
                    message=f"SM master changed on fabric {locked.name}: {_name(locked, master.guid)} "
                            f"lid {master.lid} is master (was {_name(locked, old_guid)} lid {old_lid}); "
                            f"seen by the {source}",
                    details={"old_guid": old_guid, "old_lid": old_lid, "new_guid": master.guid,
                             "new_lid": master.lid, "priority": master.priority, "source": source},
                ))  # fmt: skip
            elif old_guid and was_lost:
                specs.append(EventSpec(
                    code="sm.master_found", object_type="sm", object_key=master.guid,
                    object_repr=f"SM {_name(locked, master.guid)}",
                    message=f"SM master {_name(locked, master.guid)} lid {master.lid} answers again "
                            f"on fabric {locked.name}",
                    details={"guid": master.guid, "lid": master.lid},
                ))  # fmt: skip
            if (master.guid, master.lid, 0) != (old_guid, old_lid, locked.master_sm_missed):
                locked.master_sm_guid, locked.master_sm_lid = master.guid, master.lid
                locked.master_sm_missed = 0
                locked.save(update_fields=["master_sm_guid", "master_sm_lid", "master_sm_missed"])
                result.rows += 1
            if old_guid and old_guid != master.guid:
                result.rows += SubnetManager.objects.filter(
                    fabric=locked, guid=old_guid, state=SMState.MASTER
                ).update(state=SMState.NOT_ACTIVE)
            result.rows += store_sm(locked, master, at, touch=source != DISCOVERY)
        for sm in others:
            if master is None or sm.guid != master.guid:
                result.rows += store_sm(locked, sm, at, touch=source != DISCOVERY)
        if not_sms:
            gone = SubnetManager.objects.filter(fabric=locked, guid__in=not_sms)
            result.rows += gone.exclude(guid=master.guid if master else "").delete()[0]
        if specs:
            record_events(locked, specs, at=at)
            result.events = [s.code for s in specs]
        if result.events or result.moved:
            fabric_id, events, moved = locked.pk, list(result.events), result.moved
            transaction.on_commit(
                lambda: sm_state_changed.send(
                    sender=SMObservation, fabric_id=fabric_id, events=events, moved=moved, source=source
                )
            )
    return result


def _unreachable_open(fabric: Fabric) -> bool:
    """Whether the last ``sm.unreachable``/``sm.reachable`` event of ``fabric`` is an unreachable one."""
    last = (
        Event.objects.filter(fabric=fabric, code__in=("sm.unreachable", "sm.reachable"))
        .order_by("-at", "-id")
        .values_list("code", flat=True)
        .first()
    )
    return last == "sm.unreachable"


def store_sm(fabric: Fabric, rec: SMRecord, at: datetime, touch: bool) -> int:
    """Create or update the row of ``rec`` (``last_seen`` = ``at`` when anything changed, or always
    with ``touch``: a poll saw it now; an unchanged import writes nothing). Returns rows written."""
    row = SubnetManager.objects.filter(fabric=fabric, guid=rec.guid).first()
    values = {"lid": rec.lid, "priority": rec.priority, "state": rec.state}
    if row is None:
        SubnetManager.objects.create(
            fabric=fabric, guid=rec.guid, last_seen=at, activity_count=rec.activity_count, **values
        )
        return 1
    # ActCount moves on every SM sweep: it alone is no reason to write (an unchanged rediscovery writes 0 rows)
    if touch or any(getattr(row, k) != v for k, v in values.items()):
        for k, v in values.items():
            setattr(row, k, v)
        fields = [*values, "last_seen"]
        if rec.activity_count is not None:
            row.activity_count = rec.activity_count
            fields.append("activity_count")
        row.last_seen = at
        row.save(update_fields=fields)
        return 1
    return 0
