"""REST API: events filters, alarms acknowledge/clear by role, event policies (Admin), health run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from events.engine import process_pending_events
from events.models import EventPolicy
from events.services import EventSpec, record_events

pytestmark = pytest.mark.django_db


def test_operator_acknowledges_viewer_gets_403(alarm, users, client_for):
    url = f"/api/fabric/alarms/{alarm.pk}/acknowledge/"
    assert client_for(users["viewer"]).post(url).status_code == 403
    alarm.refresh_from_db()
    assert alarm.state == "active"
    resp = client_for(users["operator"]).post(url)
    assert resp.status_code == 200, resp.content
    assert resp.json()["state"] == "acknowledged" and resp.json()["acknowledged_by"] == "olga"
    assert AuditEntry.objects.filter(action="alarm.acknowledge", username="olga").count() == 1
    anonymous = APIClient().post(url)
    assert (anonymous.status_code, anonymous.json()) == (
        401,
        {"detail": "Authentication credentials were not provided."},
    )
    assert AuditEntry.objects.filter(action="alarm.acknowledge").count() == 1  # nothing more done


def test_clear_action_and_conflict(alarm, users, client_for):
    op = client_for(users["operator"])
    assert client_for(users["viewer"]).post(f"/api/fabric/alarms/{alarm.pk}/clear/").status_code == 403
    resp = op.post(f"/api/fabric/alarms/{alarm.pk}/clear/", {"reason": "cable replaced"}, format="json")
    assert resp.status_code == 200 and resp.json()["state"] == "cleared"
    assert resp.json()["clear_reason"] == "cable replaced" and resp.json()["cleared_by"] == "olga"
    assert op.post(f"/api/fabric/alarms/{alarm.pk}/acknowledge/").status_code == 409


def test_alarm_list_filters(alarm, users, client_for):
    c = client_for(users["viewer"])
    assert c.get("/api/fabric/alarms/?open=true").json()["count"] == 1
    assert c.get("/api/fabric/alarms/?severity=minor").json()["count"] == 0
    row = c.get("/api/fabric/alarms/?severity=critical&object=leaf01").json()["results"][0]
    assert row["type"] == "link.down" and row["name"] == "Link down" and row["count"] == 1


def test_event_filters(topo, users, client_for):
    old = timezone.now() - timedelta(days=2)
    record_events(
        topo.fabric,
        [
            EventSpec(
                code="node.added",
                message="a",
                category="topology",
                object_type="node",
                object_key="0x1",
                object_repr="host99",
            )
        ],
        at=old,
    )
    record_events(
        topo.fabric,
        [
            EventSpec(
                code="link.down",
                message="b",
                category="topology",
                object_type="link",
                object_key="k",
                severity="critical",
            )
        ],
    )
    process_pending_events(topo.fabric.pk)
    c = client_for(users["viewer"])
    get = lambda q: [e["code"] for e in c.get("/api/fabric/events/?" + q).json()["results"]]  # noqa: E731
    assert get("severity=critical") == ["link.down"]
    assert get("min_severity=minor") == ["link.down"]
    assert get("type=node.added") == ["node.added"]
    assert get("category=topology") == ["link.down", "node.added"]
    assert get("object=host99") == ["node.added"]
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert get(f"since={since}") == ["link.down"]
    assert get(f"until={since}") == ["node.added"]


def test_event_policies_admin_only_and_audited(db, users, client_for):
    assert client_for(users["operator"]).get("/api/fabric/event-policies/").status_code == 403
    admin = client_for(users["admin"])
    rows = admin.get("/api/fabric/event-policies/?limit=500").json()["results"]
    by_code = {r["code"]: r for r in rows}
    assert by_code["link.down"]["severity"] == "critical" and by_code["link.down"]["raise_alarm"] is True
    assert by_code["port.congestion"]["consecutive"] == 3
    pk = by_code["link.down"]["id"]
    resp = admin.patch(
        f"/api/fabric/event-policies/{pk}/",
        {"severity": "minor", "recipient_emails": "a@b.org", "recipient_groups": ["Operator"]},
        format="json",
    )
    assert resp.status_code == 200, resp.content
    assert EventPolicy.objects.get(code="link.down").severity == "minor"
    entry = AuditEntry.objects.get(action="event_policy.update")
    assert entry.changes["severity"] == ["critical", "minor"]
    bad = admin.patch(
        f"/api/fabric/event-policies/{pk}/", {"recipient_emails": "not-an-address"}, format="json"
    )
    assert bad.status_code == 400 and "not-an-address" in str(bad.json())
    assert (
        client_for(users["operator"])
        .patch(f"/api/fabric/event-policies/{pk}/", {"enabled": False}, format="json")
        .status_code
        == 403
    )


def test_health_run_operator(topo, users, client_for):
    from fabric.models import Port

    Port.objects.filter(node=topo.nodes["host02"], port_num=1).update(lid=10)
    assert (
        client_for(users["viewer"])
        .post("/api/fabric/health-reports/run/", {"fabric": topo.fabric.pk})
        .status_code
        == 403
    )
    resp = client_for(users["operator"]).post(
        "/api/fabric/health-reports/run/", {"fabric": topo.fabric.pk}, format="json"
    )
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["status"] == "critical" and body["summary"]["duplicate_lid"] == 1
    assert any(f["check"] == "duplicate_lid" and f["object_key"] == "10" for f in body["findings"])


def test_ordering_by_severity_is_by_rank_not_alphabetical(topo, users, client_for):
    specs = [
        EventSpec(code="link.down", message=sev, object_type="link", object_key=f"k-{sev}", severity=sev)
        for sev in ("minor", "info", "critical", "warning")
    ]
    record_events(topo.fabric, specs)
    c = client_for(users["viewer"])
    sev = lambda q: [e["severity"] for e in c.get("/api/fabric/events/?" + q).json()["results"]]  # noqa: E731
    assert sev("ordering=-severity") == ["critical", "minor", "warning", "info"]
    assert sev("ordering=severity") == ["info", "warning", "minor", "critical"]
    # alphabetical would give critical, info, minor, warning: the rank is what sorts
    assert sev("ordering=severity,at") == ["info", "warning", "minor", "critical"]
    assert (
        c.get("/api/fabric/events/?ordering=nonsense").status_code == 200
    )  # unknown fields ignored, as DRF does
