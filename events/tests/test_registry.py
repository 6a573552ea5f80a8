"""The event-type registry: each app declares its types; policies exist for every registered type
after migrate; reading policies never writes."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from events import registry
from events.choices import Category, Severity
from events.models import EventPolicy
from events.registry import EventType, RegistryError

pytestmark = pytest.mark.backend  # query counts after migrate


def test_apps_declare_their_own_types():
    by_app = {}
    for t in registry.all_types():
        by_app.setdefault(t.app, set()).add(t.code)
    assert {"link.down", "fabric.discovered", "sm.master_lost", "system.discovery_recovered"} <= by_app[
        "fabric"
    ]
    assert {"port.congestion", "health.duplicate_lid", "system.poller_failing"} <= by_app["events"]
    assert registry.get("fabric.discovered").category == Category.TOPOLOGY
    assert registry.clearing_codes("link.down") == ["link.up"]


def test_register_rejects_conflicts_and_bad_values():
    mine = EventType("fabric.discovered", "Other", Category.SYSTEM, Severity.CRITICAL)
    with pytest.raises(RegistryError, match="already registered by fabric"):
        registry.register("pools", [mine])
    with pytest.raises(RegistryError, match="severity 'loud'"):
        registry.register("pools", [EventType("pools.x", "X", Category.POOLS, "loud")])
    with pytest.raises(RegistryError, match="dotted"):
        registry.register("pools", [EventType("nodot", "X", Category.POOLS, Severity.INFO)])
    assert not registry.is_registered("pools.x") and not registry.is_registered("nodot")
    # Registering the same declaration again (ready() twice) is a no-op.
    same = registry.get("link.down")
    registry.register("fabric", [EventType(**{**same.__dict__, "app": ""})])
    assert registry.get("link.down") == same


def test_unregistered_code_gets_an_info_system_type():
    t = registry.get("legacy.thing_happened")
    assert (t.name, t.category, t.severity, t.raise_alarm) == (
        "Legacy thing happened",
        "system",
        "info",
        False,
    )


@pytest.mark.django_db
def test_every_registered_type_has_a_policy_row_after_migrate():
    codes = set(EventPolicy.objects.values_list("code", flat=True))
    assert {t.code for t in registry.all_types()} <= codes
    row = EventPolicy.objects.get(code="port.congestion")
    assert (row.threshold, row.consecutive, row.severity) == (0.5, 3, "warning")


@pytest.mark.django_db
def test_policy_list_get_writes_nothing(users, client):
    EventPolicy.objects.filter(code="link.down").delete()  # a missing row stays missing on GET
    client.force_login(users["admin"])
    client.get("/")  # the session exists before measuring
    with CaptureQueriesContext(connection) as ctx:
        api = client.get("/api/fabric/event-policies/")
        page = client.get("/event-policies/")
    assert (api.status_code, page.status_code) == (200, 200)
    writes = [
        q["sql"]
        for q in ctx.captured_queries
        if q["sql"].split()[0].upper() in {"INSERT", "UPDATE", "DELETE"}
    ]
    writes = [w for w in writes if "django_session" not in w and "last_login" not in w and "axes" not in w]
    assert writes == [] and not EventPolicy.objects.filter(code="link.down").exists()
