"""The events settings that could not be set before (retention days, health error thresholds)
take effect where they are used."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from events.health import ERROR_THRESHOLDS, error_findings
from events.models import Event
from events.services import EventSpec, prune, record_events


def _event():
    return EventSpec(
        code="node.removed", message="gone", object_type="node", object_key="0x9", object_repr="n"
    )


def test_prune_keeps_events_for_the_configured_days(topo, settings):
    now = timezone.now()
    record_events(topo.fabric, [_event()], at=now - timedelta(days=20))
    record_events(topo.fabric, [_event()], at=now - timedelta(days=5))
    Event.objects.update(evaluated=True)
    settings.WEFT_EVENT_RETENTION_DAYS = 30
    assert prune(now=now)["events"] == 0
    settings.WEFT_EVENT_RETENTION_DAYS = 10
    assert prune(now=now)["events"] == 1
    assert [e.at.date() for e in Event.objects.all()] == [(now - timedelta(days=5)).date()]


def test_health_error_thresholds_setting_overrides_the_defaults(topo, settings):
    from telemetry.models import PortCounters

    port = topo.ports[("leaf01", 2)]
    PortCounters.objects.create(port=port, symbol_errors=20, link_downed=1)
    assert ERROR_THRESHOLDS["symbol_errors"] < 20
    found = error_findings(topo.fabric)
    assert [f.details["counters"] for f in found] == [{"symbol_errors": 20}]

    settings.WEFT_HEALTH_ERROR_THRESHOLDS = {"symbol_errors": 50, "link_downed": 0}
    found = error_findings(topo.fabric)
    assert [f.details for f in found] == [{"counters": {"link_downed": 1}, "thresholds": {"link_downed": 0}}]
    # an explicit argument still wins over the setting
    assert error_findings(topo.fabric, {"link_downed": 5}) == []
