"""SM watch: which SM is master, from ``sminfo`` (SMInfo, IBTA Vol 1 14.2.5.13), every 30 s.

The other SMs (standby) are found through the SA: ``saquery -s`` lists the ports with the IsSM
capability bit, and ``sminfo <lid>`` reads each one's SMInfo (state, priority, ActCount).

``sminfo`` asks the SM at the local port's MasterSMLID; its answer names the master's port GUID
and LID. Compared with ``Fabric.master_sm_guid`` (the last known master):

* another GUID → ``sm.master_changed`` (object ``sm``, key the new master's GUID; the message
  names the old and new master, with node descriptions when the topology knows them);
* no answer for ``consecutive`` polls of the ``sm.master_lost`` policy (default 1, poll every
  30 s) → ``sm.master_lost`` once; an answer afterwards from the same SM → ``sm.master_found``,
  from another → ``sm.master_changed``; both clear the "lost" alarm;
* the first master seen is recorded without an event.

The master's ``SubnetManager`` row is updated (state MASTER, priority, ActCount); the row of a
previous master is set NOT_ACTIVE (sminfo does not say what became of it; the next discovery
reads the real state).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from .parsers import SMInfoParseError, SMInfoRecord, parse_saquery_sm_ports, parse_sminfo
from .services import EventSpec, record_events

log = logging.getLogger(__name__)


@dataclass
class SMWatchResult:
    """One poll: the master read (None when sminfo failed), the event code written (or "")."""

    fabric: str
    master: SMInfoRecord | None
    event: str = ""
    error: str = ""

    def as_dict(self) -> dict:
        return {
            "fabric": self.fabric,
            "master_guid": self.master.guid if self.master else None,
            "master_lid": self.master.lid if self.master else None,
            "event": self.event,
            "error": self.error,
        }


def read_master(fabric, timeout: float = 15.0) -> tuple[SMInfoRecord | None, str]:
    """Run ``sminfo`` for ``fabric`` and return ``(master record, "")`` or ``(None, error)``.

    The tool runs through ``fabric.collectors.tools.run_tool`` with the fabric's environment and
    ``-C``/``-P``; a timeout, a non-zero exit or unparsable output is returned as an error text.
    """
    from fabric.collectors.tools import fabric_ca_args, fabric_env, run_tool

    try:
        out = run_tool(["sminfo", *fabric_ca_args(fabric)], env=fabric_env(fabric), timeout=timeout)
    except Exception as exc:  # ToolError, timeout, missing binary
        return None, str(exc)[:500]
    text = out if isinstance(out, str) else getattr(out, "stdout", "")
    try:
        records = parse_sminfo(text, source="sminfo")
    except SMInfoParseError as exc:
        return None, str(exc)
    masters = [r for r in records if r.is_master]
    if not masters:
        return None, f"sminfo answered from {records[0].guid} in state {records[0].state_name}, not MASTER"
    return masters[0], ""


def read_all_sms(fabric, timeout: float = 15.0) -> tuple[list[SMInfoRecord], str]:
    """Every SM of the subnet: the SA's IsSM ports (``saquery -s``), then ``sminfo <lid>`` each.

    Returns ``(records, "")`` or ``(records read so far, error)``; an SM that does not answer
    is left out (its error is in the text).
    """
    from fabric.collectors.tools import fabric_ca_args, fabric_env, run_tool

    env, ca = fabric_env(fabric), fabric_ca_args(fabric)
    try:
        out = run_tool(["saquery", *ca, "-s"], env=env, timeout=timeout)
        lids = parse_saquery_sm_ports(out.stdout, source="saquery -s")
    except Exception as exc:  # ToolError, timeout, SAQueryParseError
        return [], f"saquery -s: {str(exc)[:300]}"
    records: list[SMInfoRecord] = []
    errors = []
    for lid in lids:
        try:
            res = run_tool(["sminfo", *ca, str(lid)], env=env, timeout=timeout)
            records += parse_sminfo(res.stdout, source=f"sminfo {lid}")
        except Exception as exc:
            errors.append(f"sminfo {lid}: {str(exc)[:200]}")
    return records, "; ".join(errors)


def _name(fabric, guid: str) -> str:
    from fabric.models import Node, Port

    port = Port.objects.filter(node__fabric=fabric, port_guid=guid).select_related("node").first()
    if port is not None:
        return f"{port.node} ({guid})"
    node = Node.objects.filter(fabric=fabric, node_guid=guid).first()
    return f"{node} ({guid})" if node is not None else guid


def watch(fabric, master: SMInfoRecord | None = None, error: str = "", read: bool = True) -> SMWatchResult:
    """Poll the SM of ``fabric`` (or use ``master``/``error`` already read) and record events.

    Writes in one transaction with the fabric row locked; the rules engine applies the events
    after commit (``process_pending_events``).
    """
    from fabric.choices import SMState
    from fabric.models import Fabric, SubnetManager

    from .models import ConditionState
    from .rules import load_policies

    others: list[SMInfoRecord] = []
    if read and master is None and not error:
        master, error = read_master(fabric)
        if master is not None:
            others = [r for r in read_all_sms(fabric)[0] if r.guid != master.guid]
    result = SMWatchResult(fabric=fabric.name, master=master, error=error)
    now = timezone.now()
    with transaction.atomic():
        fabric = Fabric.objects.select_for_update().get(pk=fabric.pk)
        lost_policy = load_policies()["sm.master_lost"]
        state, _ = ConditionState.objects.select_for_update().get_or_create(
            fabric=fabric, code="sm.master_lost", object_key="sm"
        )
        old_guid, old_lid = fabric.master_sm_guid, fabric.master_sm_lid
        specs: list[EventSpec] = []
        if master is None:
            state.over += 1
            state.under = 0
            if old_guid and state.over == lost_policy.consecutive:
                specs.append(EventSpec(
                    code="sm.master_lost", category="sm", object_type="sm", object_key=old_guid,
                    object_repr=f"SM {_name(fabric, old_guid)}",
                    message=f"No master SM answers on fabric {fabric.name} (last master "
                            f"{_name(fabric, old_guid)} lid {old_lid}): {error}",
                    details={"last_master_guid": old_guid, "last_master_lid": old_lid, "error": error},
                ))  # fmt: skip
            state.save(update_fields=["over", "under", "updated"])
        else:
            was_lost = state.over >= lost_policy.consecutive
            state.over = 0
            state.under += 1
            state.value = master.lid
            state.save(update_fields=["over", "under", "value", "updated"])
            if old_guid and master.guid != old_guid:
                specs.append(EventSpec(
                    code="sm.master_changed", category="sm", object_type="sm", object_key=master.guid,
                    object_repr=f"SM {_name(fabric, master.guid)}",
                    message=f"SM master changed on fabric {fabric.name}: {_name(fabric, master.guid)} "
                            f"lid {master.lid} is master (was {_name(fabric, old_guid)} lid {old_lid})",
                    details={"old_guid": old_guid, "old_lid": old_lid, "new_guid": master.guid,
                             "new_lid": master.lid, "priority": master.priority},
                ))  # fmt: skip
            elif old_guid and was_lost:
                specs.append(EventSpec(
                    code="sm.master_found", category="sm", object_type="sm", object_key=master.guid,
                    object_repr=f"SM {_name(fabric, master.guid)}",
                    message=f"SM master {_name(fabric, master.guid)} lid {master.lid} answers again "
                            f"on fabric {fabric.name}",
                    details={"guid": master.guid, "lid": master.lid},
                ))  # fmt: skip
            if master.guid != old_guid or master.lid != old_lid:
                fabric.master_sm_guid, fabric.master_sm_lid = master.guid, master.lid
                fabric.save(update_fields=["master_sm_guid", "master_sm_lid"])
            if old_guid and old_guid != master.guid:
                SubnetManager.objects.filter(fabric=fabric, guid=old_guid, state=SMState.MASTER).update(
                    state=SMState.NOT_ACTIVE
                )
            SubnetManager.objects.update_or_create(
                fabric=fabric, guid=master.guid,
                defaults={"lid": master.lid, "priority": master.priority, "state": SMState.MASTER,
                          "activity_count": master.activity_count, "last_seen": now},
            )  # fmt: skip
            for sm in others:  # standby/discovering SMs found through the SA
                SubnetManager.objects.update_or_create(
                    fabric=fabric, guid=sm.guid,
                    defaults={"lid": sm.lid, "priority": sm.priority, "state": sm.state,
                              "activity_count": sm.activity_count, "last_seen": now},
                )  # fmt: skip
        if specs:
            for spec in specs:
                spec.severity = load_policies()[spec.code].severity
            record_events(fabric, specs, at=now)
            result.event = specs[0].code
    if result.event:
        from .rules import process_pending_events

        process_pending_events(fabric.pk)
    return result
