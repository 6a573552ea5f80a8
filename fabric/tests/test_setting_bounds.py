"""A fabric's numeric settings are bounded (API, model, database), and one fabric's error in the
periodic runs is that fabric's alarm at once while the others go on (issue 22: a discovery
timeout of 1.8e308 s or a port of 1.4e18 was accepted and then aborted the periodic discovery of
every fabric)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from events.engine import process_pending_events
from events.models import Alarm
from fabric.models import Discovery, Fabric
from fabric.tasks import discover_all_task


@pytest.mark.django_db
@pytest.mark.parametrize(
    "field, raw",
    [
        ("discovery_timeout_s", "1.8e308"),  # JSON's largest double: inf once parsed
        ("discovery_timeout_s", "-8e15"),
        ("discovery_timeout_s", "0"),
        ("discovery_timeout_s", "86401"),
        ("ca_port", "1400000000000000000"),
        ("ca_port", "0"),
        ("ca_port", "255"),
    ],
)
def test_api_refuses_out_of_range_settings_naming_the_field(admin, field, raw):
    body = f'{{"name": "f1", "ca_name": "mlx5_0", "{field}": {raw}}}'
    created = admin.post("/api/fabric/fabrics/", body, content_type="application/json")
    assert created.status_code == 400, created.content
    # a number no double holds is refused by the JSON parser itself (core.api.parsers.StrictJSON),
    # before any field sees it: the answer names the number; every other value names the field
    named = ["detail"] if raw == "1.8e308" else [field]
    assert list(created.json()) == named, created.json()
    if raw == "1.8e308":
        assert raw in created.json()["detail"] or "inf" in created.json()["detail"].lower(), created.json()
    assert not Fabric.objects.exists()
    fabric = Fabric.objects.create(name="f2", ca_name="mlx5_0")
    patched = admin.patch(
        f"/api/fabric/fabrics/{fabric.pk}/", f'{{"{field}": {raw}}}', content_type="application/json"
    )
    assert patched.status_code == 400 and list(patched.json()) == named
    fabric.refresh_from_db()
    assert (fabric.discovery_timeout_s, fabric.ca_port) == (300.0, None)


@pytest.mark.django_db
def test_api_accepts_the_bounds_themselves(admin):
    body = {"name": "edge", "ca_name": "mlx5_0", "ca_port": 254, "discovery_timeout_s": 86400}
    assert admin.post("/api/fabric/fabrics/", body, format="json").status_code == 201
    fabric = Fabric.objects.get(name="edge")
    assert (fabric.ca_port, fabric.discovery_timeout_s) == (254, 86400.0)
    assert (
        admin.patch(
            f"/api/fabric/fabrics/{fabric.pk}/", {"ca_port": 1, "discovery_timeout_s": 1}, format="json"
        ).status_code
        == 200
    )


@pytest.mark.django_db
def test_model_and_database_refuse_out_of_range_settings():
    fabric = Fabric.objects.create(name="f", ca_name="mlx5_0")
    fabric.discovery_timeout_s = 1e300
    with pytest.raises(ValidationError) as info:
        fabric.full_clean()
    assert "discovery_timeout_s" in info.value.message_dict
    for change in (
        {"discovery_timeout_s": 1e300},
        {"discovery_timeout_s": -8e15},
        {"ca_port": 300},
        {"ca_port": 0},
    ):
        with pytest.raises(IntegrityError), transaction.atomic():
            Fabric.objects.filter(pk=fabric.pk).update(**change)
    fabric.refresh_from_db()
    assert (fabric.discovery_timeout_s, fabric.ca_port) == (300.0, None)


@pytest.mark.django_db
def test_one_fabrics_unexpected_error_is_its_alarm_and_the_next_fabric_is_discovered(
    committed_signals, caplog
):
    # a setting no check caught (written by an older version, straight into the database): an
    # environment variable name with "=" makes the tool's start raise ValueError, not a DiscoveryError
    bad = Fabric.objects.create(name="a-bad", tool_env={"BAD=NAME": "x"})
    Fabric.objects.create(name="b-next", tool_env={"SIM_HOST": "no-such-lab"})
    results = discover_all_task()
    assert [r["fabric"] for r in results] == ["a-bad", "b-next"]
    assert results[0]["error"] == "unexpected error: ValueError: illegal environment variable name"
    assert "ibnetdiscover" in results[1]["error"]  # the next fabric was run (and fails on its own)
    process_pending_events(bad.pk)  # what the commit hook does (this test's transaction never commits)
    alarm = Alarm.objects.open().get(code="system.discovery_failing", object_key="a-bad")
    assert alarm.fabric_id == bad.pk and "illegal environment variable name" in alarm.message
    assert Discovery.objects.filter(fabric=bad, status="failed").count() == 1
