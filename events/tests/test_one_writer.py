"""One writer per fact, through the whole flow: every receiver of the fabric and telemetry signals
stays attached (the events rules, the heatmap, the rediscovery listener) and Celery runs eagerly,
so what a test counts is what an admin would see."""

from __future__ import annotations

import pytest

from events.engine import process_pending_events
from events.models import Alarm, Event
from fabric.collectors.ibnetdiscover import DiscoveryError
from fabric.models import Fabric
from fabric.services.discovery import discover

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def _fabric(lab, name: str) -> Fabric:
    return Fabric.objects.create(name=name, tool_env=dict(lab.tool_env))


def _codes(fabric: Fabric, code: str) -> list[str]:
    return list(Event.objects.filter(fabric=fabric, code=code).values_list("message", flat=True))


def test_discovery_failure_then_success_writes_one_recovered_event(small_lab):
    fabric = _fabric(small_lab, "once")
    discover(fabric, timeout=60)
    Fabric.objects.filter(pk=fabric.pk).update(ca_name="mlx5_97")  # no such CA: iberror, exit 255
    fabric.refresh_from_db()
    with pytest.raises(DiscoveryError):
        discover(fabric, timeout=60)
    process_pending_events(fabric.pk)  # what the minute flush does: the failing alarm opens
    failing = Alarm.objects.open().get(fabric=fabric, code="system.discovery_failing")
    Fabric.objects.filter(pk=fabric.pk).update(ca_name="")
    fabric.refresh_from_db()
    discover(fabric, timeout=60)
    recovered = _codes(fabric, "system.discovery_recovered")
    assert recovered == [f"live discovery of {fabric.name} works again"]
    failing.refresh_from_db()
    assert failing.state == "cleared" and "system.discovery_recovered" in failing.clear_reason
    assert len(_codes(fabric, "system.discovery_failing")) == 1


def test_sm_watch_discovery_and_sweep_agree_on_the_master(small_lab):
    """The SM watch, a discovery and a sweep all see the same master: one SM row in state MASTER,
    ``Fabric.master_sm_*`` set once, and no ``sm.*`` event from any of them."""
    from fabric.models import SubnetManager
    from fabric.services.sm import watch
    from telemetry.services.sweep import poll_fabric

    fabric = _fabric(small_lab, "agree")
    seen = watch(fabric)
    master = small_lab.sm_info()
    assert seen.master is not None and seen.master.guid == master["guid"] and seen.events == []
    discover(fabric, timeout=60)
    fabric.refresh_from_db()
    sweep = poll_fabric(fabric, timeout=60)
    assert "master SM" not in sweep.error and "sminfo failed" not in sweep.error, sweep.error
    assert watch(fabric).events == []
    fabric.refresh_from_db()
    assert (fabric.master_sm_guid, fabric.master_sm_lid, fabric.master_sm_missed) == (
        master["guid"],
        master["lid"],
        0,
    )
    rows = list(SubnetManager.objects.filter(fabric=fabric).values_list("guid", "state"))
    assert rows == [(master["guid"], 3)]
    assert not Event.objects.filter(fabric=fabric, code__startswith="sm.").exists()


@pytest.mark.slow
def test_sweep_sees_sm_failover_records_it_once_and_rediscovers(lab_factory):
    """The master OpenSM dies and the standby takes over: the next sweep records
    ``sm.master_changed`` (through the SM service, source ``sweep``), the fabric's listener queues
    the rediscovery (eager here: it runs at commit), and neither that discovery nor the SM watch
    writes the move again."""
    from fabric.models import Discovery
    from fabric.services.sm import watch
    from lab.pytest_plugin import small_netfile
    from telemetry.services.sweep import poll_fabric

    lab = lab_factory(
        small_netfile(),
        standby_sm="Hca2",
        opensm_conf={"sminfo_polling_timeout": "1000", "polling_retry_number": "2"},
    )
    old = lab.wait_master(60)
    fabric = _fabric(lab, "failover")
    discover(fabric, timeout=60)
    discoveries = Discovery.objects.filter(fabric=fabric).count()
    lab.kill_master_sm()
    new = None
    for _ in range(90):  # bounded: OpenSM's standby takes over after its polling retries
        try:
            new = lab.wait_master(2)
        except Exception:
            continue
        if new["guid"] != old["guid"]:
            break
    assert new is not None and new["guid"] != old["guid"], new
    fabric.refresh_from_db()
    sweep = poll_fabric(fabric, timeout=60)
    assert "master SM moved" in sweep.error
    changed = Event.objects.get(fabric=fabric, code="sm.master_changed")
    assert changed.details["source"] == "sweep" and changed.details["new_guid"] == new["guid"]
    assert Discovery.objects.filter(fabric=fabric).count() == discoveries + 1  # queued by the listener
    assert watch(fabric).events == []
    discover(fabric, timeout=60)
    assert Event.objects.filter(fabric=fabric, code="sm.master_changed").count() == 1
    fabric.refresh_from_db()
    assert fabric.master_sm_guid == new["guid"]
