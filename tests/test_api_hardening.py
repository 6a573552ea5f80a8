"""Project-wide API hardening: the schema and docs need a signed-in user, and ``?limit=`` has a
ceiling (a huge value was a 500 from the database, any large one serialised a whole table)."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE


@pytest.mark.parametrize(
    "url,anonymous_status,signed_in_text",
    [
        ("/api/schema/", 401, "/api/fabric/nodes/"),  # the API answers 401; the schema lists the API
        ("/api/docs/", 302, "swagger-ui"),  # pages send anonymous users to the login form
        ("/api/redoc/", 302, "redoc"),
    ],
)
def test_schema_and_docs_need_a_signed_in_user(db, viewer, url, anonymous_status, signed_in_text):
    anonymous = APIClient().get(url)
    assert anonymous.status_code == anonymous_status
    if anonymous.status_code == 302:
        assert anonymous["Location"].startswith("/accounts/login/")
    assert signed_in_text not in anonymous.content.decode()
    resp = viewer.get(url)
    assert resp.status_code == 200
    assert signed_in_text in resp.content.decode()


@pytest.mark.parametrize(
    "url", ["/api/fabric/nodes/", "/api/fabric/ports/", "/api/fabric/fabrics/", "/api/fabric/events/"]
)
def test_huge_limit_is_capped_not_a_500(db, viewer, url):
    import_topology_text("f", BASE, filename="base.topo")
    resp = viewer.get(url + "?limit=99999999999999999999")
    assert resp.status_code == 200, resp.content[:300]
    assert viewer.get(url + "?offset=99999999999999999999").status_code == 200
    body = resp.json()
    assert body["count"] > 0 and len(body["results"]) == min(body["count"], settings.WEFT_API_MAX_LIMIT)
    beyond = viewer.get(url + "?offset=99999999999999999999").json()
    assert (beyond["count"], beyond["results"]) == (body["count"], [])


@override_settings(WEFT_API_MAX_LIMIT=2)
def test_limit_above_the_ceiling_returns_the_ceiling(db, viewer):
    import_topology_text("f", BASE, filename="base.topo")
    body = viewer.get("/api/fabric/nodes/?limit=1000").json()
    assert body["count"] > 2 and len(body["results"]) == 2 and body["next"]


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e309"])
def test_float_fields_refuse_nan_and_infinity(admin, value):
    """A stored NaN/inf made every later GET of the fabric list a 500 (JSON has neither)."""
    from events.models import EventPolicy
    from events.policies import ensure_policies

    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    resp = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"discovery_timeout_s": value}, format="json")
    assert resp.status_code == 400, resp.content
    assert "discovery_timeout_s" in resp.json()
    listed = admin.get("/api/fabric/fabrics/")
    assert listed.status_code == 200
    assert [(f["name"], f["discovery_timeout_s"]) for f in listed.json()["results"]] == [("f", 300.0)]
    ensure_policies()
    policy = EventPolicy.objects.exclude(threshold=None).first() or EventPolicy.objects.first()
    resp = admin.patch(f"/api/fabric/event-policies/{policy.pk}/", {"threshold": value}, format="json")
    assert resp.status_code == 400, resp.content
    policies = admin.get("/api/fabric/event-policies/", {"code": policy.code})
    assert policies.status_code == 200
    assert [p["threshold"] for p in policies.json()["results"]] == [policy.threshold]  # unchanged
    ok = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"discovery_timeout_s": 42.5}, format="json")
    assert ok.status_code == 200 and ok.json()["discovery_timeout_s"] == 42.5


def test_a_uniqueness_race_is_409_not_a_500(admin, monkeypatch, caplog):
    """Two identical creates at once both pass the serializer's unique check; the second insert
    fails in the database. Forced here by switching the check off: the answer is a 409 naming no
    SQL, nothing of the second request is written (no tenant, no audit entry), no traceback."""
    from rest_framework.validators import UniqueValidator

    from accounts.models import AuditEntry
    from core.api.errors import CONFLICT_DETAIL
    from pools.models import Tenant

    first = admin.post("/api/pools/tenants/", {"name": "race"}, format="json")
    assert first.status_code == 201, first.content
    monkeypatch.setattr(UniqueValidator, "__call__", lambda self, value, field: None)  # the race's window
    audits = AuditEntry.objects.count()
    with caplog.at_level("INFO"):
        second = admin.post("/api/pools/tenants/", {"name": "race"}, format="json")
    assert second.status_code == 409 and second.json() == {"detail": CONFLICT_DETAIL}
    assert "UNIQUE" not in second.content.decode().upper()
    assert Tenant.objects.filter(name="race").count() == 1 and AuditEntry.objects.count() == audits
    assert not [r for r in caplog.records if r.exc_info]
