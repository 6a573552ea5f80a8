"""The demo's moving parts together on a real lab (issue 10): the traffic player's packets follow
its bytes, a flap injected by ``lab.faults`` is an alarm within seconds (SM notices), the pulled
cable carries no traffic while it is down, and the alarm clears when the injector relinks."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from tests.support.waits import locked_is_not_yet, wait_for

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_demo_traffic_and_flap(lab_factory):
    from django.db import connection

    from events.models import Alarm
    from fabric.keys import link_ends, link_key_str
    from fabric.models import Fabric
    from fabric.services.discovery import discover
    from fabric.services.notice_status import notice_status
    from fabric.services.notices import NoticeListener
    from lab.faults import FaultInjector
    from lab.pytest_plugin import small_netfile
    from lab.traffic import PACKET_BYTES, TrafficPlayer
    from telemetry.models import PortCounters
    from telemetry.services.sweep import poll_fabric

    if connection.vendor == "sqlite":  # reads must not wait for the listener's table locks
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")
    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="demo", tool_env=dict(lab.tool_env))
    discover(fabric)
    listener = NoticeListener(fabric.pk, fallback="off")
    listener.start()
    player = TrafficPlayer(lab, fabric, interval=0.2, seed=1)
    try:
        wait_for(lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed", 30, "subscribed")
        player.start()

        def sweep_after_ticks(n: int = 3):
            ticks = player.ticks
            wait_for(lambda: player.ticks >= ticks + n, 10, f"{n} traffic ticks")
            fabric.refresh_from_db()
            return locked_is_not_yet(lambda: poll_fabric(fabric, timeout=30))

        wait_for(sweep_after_ticks(), 30, "a first sweep")
        wait_for(sweep_after_ticks(), 30, "a sweep with rates")
        rows = locked_is_not_yet(
            lambda: list(
                PortCounters.objects.filter(
                    port__node__fabric=fabric, port__node__node_type="switch", stale=False
                )
                .exclude(xmit_bytes_per_s=None)
                .filter(xmit_bytes_per_s__gt=0)
            )
        )()
        assert rows, "no switch port carried traffic"
        for row in rows:  # packets follow bytes: full-MTU packets
            assert row.xmit_pkts_per_s == pytest.approx(row.xmit_bytes_per_s / PACKET_BYTES, rel=0.05)

        injector = FaultInjector(lab, 3600, kinds=("flap",), flap_s=8, seed=7)
        t0 = time.monotonic()
        fault = injector.inject_once()
        peer = {"Switch1": "Switch2", "Switch2": "Switch1"}[fault.node]
        g1, g2 = lab.guid_of(fault.node), lab.guid_of(peer)
        key = link_key_str(link_ends(g1, fault.port, g2, fault.port))

        def alarm(state):
            return Alarm.objects.filter(
                fabric=fabric, code="link.down", object_key=key, state__in=state
            ).first()

        wait_for(
            locked_is_not_yet(lambda: alarm(("active",))),
            settings.WEFT_POLL_INTERVAL_S + 2,
            "the flap's alarm",
        )
        seen = time.monotonic() - t0
        assert not lab.is_linked(fault.node, fault.port) and not lab.is_linked(peer, fault.port)
        # while the cable is down its two ports carry nothing: the second sweep of the flap spans
        # only down time (the first one's interval still had the MADs that crossed it before)
        wait_for(sweep_after_ticks(), 30, "a sweep during the flap")
        wait_for(sweep_after_ticks(), 30, "a second sweep during the flap")
        assert not lab.is_linked(fault.node, fault.port), "the flap ended before the sweeps"
        down = locked_is_not_yet(
            lambda: list(
                PortCounters.objects.filter(
                    port__node__node_guid__in=[g1, g2], port__port_num=fault.port
                ).values_list("xmit_bytes_per_s", "rcv_bytes_per_s", "xmit_pkts_per_s", "rcv_pkts_per_s")
            )
        )()
        assert down == [(0.0, 0.0, 0.0, 0.0)] * 2, down
        wait_for(
            locked_is_not_yet(lambda: alarm(("cleared",))),
            8 + settings.WEFT_POLL_INTERVAL_S + 2,
            "relinked and cleared",
        )
        print(f"demo flap: alarm {seen:.3f} s after the injector pulled {fault.node}[{fault.port}]")
    finally:
        player.stop()
        listener.stop()
