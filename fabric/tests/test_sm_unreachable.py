"""The SM watch tells "the SM cannot be seen from this host" from "no master SM" (real lab).

Before: ``sminfo`` timing out (a hung fabric) raised a Critical ``sm.master_lost``.
"""

from __future__ import annotations

import pytest

from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.models import Fabric
from fabric.services.sm import watch
from lab.pytest_plugin import small_netfile

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def codes(fabric) -> list[str]:
    return list(Event.objects.filter(fabric=fabric).order_by("at", "id").values_list("code", flat=True))


def test_sminfo_hanging_is_sm_unreachable_not_master_lost(lab_factory):
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="sm-hung", tool_env=lab.tool_env)
    first = watch(fabric, timeout=10)
    assert first.master is not None and first.reached
    lab.hang()
    seen = watch(fabric, timeout=2)
    assert seen.master is None and not seen.reached and seen.events == ["sm.unreachable"]
    event = Event.objects.get(fabric=fabric, code="sm.unreachable")
    assert event.severity == "minor" and event.object_key == first.master.guid
    assert (
        "sminfo did not finish within 2 s" in event.message
        and "cannot be seen from this host" in event.message
    )
    assert first.master.guid in event.message and "not a lost master" in event.message
    assert event.details["last_master_lid"] == first.master.lid
    assert watch(fabric, timeout=2).events == []  # once per episode
    fabric.refresh_from_db()
    assert fabric.master_sm_missed == 0 and fabric.master_sm_guid == first.master.guid
    process_pending_events(fabric.pk)
    alarm = Alarm.objects.get(fabric=fabric, code="sm.unreachable")
    assert alarm.state == "active" and alarm.severity == "minor"
    assert "sm.master_lost" not in codes(fabric)


def test_local_port_failure_is_unreachable_and_clears_when_the_sm_is_seen_again(small_lab):
    fabric = Fabric.objects.create(name="sm-port", tool_env=small_lab.tool_env)
    master = watch(fabric).master
    fabric.ca_name = "mlx5_97"  # no such HCA: sminfo cannot open the local port
    fabric.save(update_fields=["ca_name"])
    seen = watch(fabric)
    assert not seen.reached and seen.events == ["sm.unreachable"]
    assert "can't open UMAD port" in Event.objects.get(fabric=fabric, code="sm.unreachable").message
    process_pending_events(fabric.pk)
    fabric.ca_name = ""
    fabric.save(update_fields=["ca_name"])
    back = watch(fabric)
    assert back.reached and back.master.guid == master.guid and back.events == ["sm.reachable"]
    assert master.guid in Event.objects.get(fabric=fabric, code="sm.reachable").message
    process_pending_events(fabric.pk)
    assert Alarm.objects.get(fabric=fabric, code="sm.unreachable").state == "cleared"
    assert codes(fabric) == ["sm.unreachable", "sm.reachable"]


def test_a_dead_sm_is_still_master_lost(lab_factory):
    """The MAD to the port's MasterSMLID goes unanswered: the subnet was reached, no master answers."""
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="sm-dead", tool_env=lab.tool_env)
    master = watch(fabric).master
    lab.kill_master_sm()
    seen = watch(fabric, timeout=10)
    assert seen.reached and seen.master is None and seen.events == ["sm.master_lost"]
    lost = Event.objects.get(fabric=fabric, code="sm.master_lost")
    assert lost.severity == "critical" and master.guid in lost.message and "_do_madrpc failed" in lost.message
