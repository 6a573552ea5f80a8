"""Alert targets (issue 26 §2) against real receivers on loopback: a signed-webhook receiver that
checks the HMAC and fails on purpose (retries through ``outbound``), Slack's message shape, the
storm control shared with mail, the per-target severity filter, syslog RFC 5424 over UDP and
TCP (octet counting) parsed strictly, and Debian's ``prometheus-alertmanager`` (firing, then
resolved by the clear)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from events.alerting import resend_firing, send_pending_targets, send_test
from events.engine import process_pending_events
from events.models import Alarm, AlertTarget, Event, Notification
from events.policies import ensure_policies
from events.services import EventSpec, record_events
from outbound import syslog
from outbound.models import WebhookDelivery
from outbound.services import retry_due
from tests.support.receivers import (
    ALERTMANAGER,
    RSYSLOGD,
    HookReceiver,
    SyslogReceiver,
    alertmanager,
    alertmanager_alerts,
    parse_5424,
    rsyslogd,
    split_octet_counted,
)
from tests.support.waits import wait_for

pytestmark = pytest.mark.django_db


def link_down(topo, a, b):
    return EventSpec(code="link.down", message=f"link {a} {b} went down", category="topology",
                     object_type="link", object_key=topo.link_key(a, b),
                     node_id=topo.ports[a].node_id, port_id=topo.ports[a].pk)  # fmt: skip


def link_up(topo, a, b):
    return EventSpec(code="link.up", message="link came back", category="topology", object_type="link",
                     object_key=topo.link_key(a, b))  # fmt: skip


def raise_and_send(topo, specs):
    record_events(topo.fabric, specs)
    process_pending_events(topo.fabric.pk)
    return send_pending_targets()


@pytest.fixture
def hook():
    r = HookReceiver(secret="on-call-key")
    yield r
    r.close()


# -- pure formats ----------------------------------------------------------------------------------
def test_rfc5424_message_parses_strictly_with_escaped_structured_data():
    from datetime import UTC, datetime

    at = datetime(2026, 12, 7, 6, 1, 2, 345678, tzinfo=UTC)
    text = syslog.format_message(
        severity=syslog.CRITICAL, facility=16, at=at, hostname="weft-1", app_name="weft", msgid="link.down",
        sd_id="weft@32473", msg="leaf01 [3]\nis down",
        params={"fabric": "lab", "node": 'sw "a"]\\', "port": 3, "severity": "critical", "empty": ""},
    )  # fmt: skip
    assert text.startswith("<130>1 2026-12-07T06:01:02.345678Z weft-1 weft - link.down [weft@32473 ")
    assert r'node="sw \"a\"\]\\"' in text and "empty" not in text
    p = parse_5424(text)
    assert (p["facility"], p["severity"], p["msgid"], p["hostname"]) == (16, 2, "link.down", "weft-1")
    assert p["sd"] == {
        "weft@32473": {"fabric": "lab", "node": 'sw "a"]\\', "port": "3", "severity": "critical"}
    }
    assert p["msg"] == "leaf01 [3] is down"  # one line: a stored batch is one message a line
    framed = syslog.octet_frame(text) + syslog.octet_frame("<14>1 - - - - - -")
    assert split_octet_counted(framed) == [text, "<14>1 - - - - - -"]
    with pytest.raises(ValueError):
        parse_5424('<14>1 - - - - - [x a="b"]')  # an SD-ID must be registered or name@number
    with pytest.raises(ValueError):
        syslog.format_message(severity=8, at=at, msg="x")


# -- signed webhook -------------------------------------------------------------------------------
def test_webhook_target_gets_signed_raise_and_clear_with_retries(topo, hook, settings):
    settings.WEFT_WEBHOOK_BACKOFF_S = 10
    ensure_policies()
    hook.fail = 2  # the receiver answers 503 twice: outbound retries with back-off
    t = AlertTarget.objects.create(name="noc", kind="webhook", url=hook.url, secret="on-call-key")
    assert raise_and_send(topo, [link_down(topo, ("spine01", 1), ("leaf01", 1))])["single"] == 1
    alarm = Alarm.objects.get()
    now = timezone.now()
    assert retry_due(now) == {"pending": 1}
    assert retry_due(now + timedelta(seconds=11)) == {"pending": 1}
    assert retry_due(now + timedelta(seconds=60)) == {"delivered": 1}
    assert len(hook.got) == 3 and all(g["signed"] for g in hook.got)
    body = hook.json()
    assert body["event"] == "alarm.raised" and hook.got[-1]["headers"]["x-weft-event"] == "alarm.raised"
    a = body["data"]["alarm"]
    assert (a["id"], a["code"], a["severity"], a["fabric"], a["node"], a["port"]) == (
        alarm.pk, "link.down", "critical", "lab", "spine01", 1)  # fmt: skip
    assert a["url"].endswith(f"/alarms/{alarm.pk}/") and "spine01 [1]" in a["object"]
    (row,) = WebhookDelivery.objects.filter(target=t.delivery_key)
    assert (row.status, row.attempts, row.response_code, row.source) == (
        "delivered",
        3,
        200,
        f"alarm:{alarm.pk}",
    )
    # the clear (link.up) goes too, whatever the policy's notify_clear
    raise_and_send(topo, [link_up(topo, ("spine01", 1), ("leaf01", 1))])
    assert retry_due(timezone.now() + timedelta(seconds=1)) == {"delivered": 1}
    assert hook.json()["event"] == "alarm.cleared" and hook.json()["data"]["alarm"]["state"] == "cleared"
    # a wrong secret: the receiver refuses (401), outbound gives up at once and logs it
    t.secret = "wrong"
    t.save()
    row = send_test(t)
    assert (row.status, row.response_code) == ("failed", 401) and not hook.got[-1]["signed"]


def test_severity_filter_disabled_target_and_slack_shape(topo, hook):
    ensure_policies()
    slack = AlertTarget.objects.create(name="chat", kind="slack", url=hook.url, secret="on-call-key",
                                       min_severity="critical")  # fmt: skip
    AlertTarget.objects.create(name="off", kind="webhook", url=hook.url, enabled=False)
    warn = AlertTarget.objects.create(
        name="crit-hook", kind="webhook", url=hook.url, secret="on-call-key", min_severity="critical"
    )
    # node.removed is Minor: below both enabled targets' minimum
    spec = EventSpec(code="node.removed", message="gone", category="topology", object_type="node",
                     object_key=topo.nodes["host01"].node_guid)  # fmt: skip
    assert raise_and_send(topo, [spec])["messages"] == 0
    assert not Notification.objects.filter(target__isnull=False).exists()
    raise_and_send(topo, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
    assert retry_due() == {"delivered": 2}
    keys = set(WebhookDelivery.objects.values_list("target", flat=True))
    assert keys == {slack.delivery_key, warn.delivery_key}
    msg = next(json.loads(g["body"]) for g in hook.got if "blocks" in json.loads(g["body"]))
    assert msg["text"].startswith("[Weft CRITICAL] Link down:") and "(fabric lab)" in msg["text"]
    assert msg["blocks"][0]["type"] == "section" and msg["blocks"][0]["text"]["type"] == "mrkdwn"
    alarm = Alarm.objects.get(code="link.down")
    assert f"/alarms/{alarm.pk}/|" in msg["blocks"][0]["text"]["text"]


def test_a_storm_goes_to_a_target_as_one_summary(topo, hook):
    """Eight links down at once: one message (as the one summary mail), not eight."""
    from fabric.models import Link, Node, Port

    ensure_policies()
    t = AlertTarget.objects.create(name="noc", kind="webhook", url=hook.url, secret="on-call-key")
    leaf, specs = topo.nodes["leaf01"], []
    for i in range(3, 11):
        host = Node.objects.create(fabric=topo.fabric, node_guid=f"0x{0x9000 + i:016x}", node_type="ca",
                                   description=f"host{i:02d} mlx5_0")  # fmt: skip
        pa = Port.objects.create(node=leaf, port_num=i, state=4)
        pb = Port.objects.create(node=host, port_num=1, state=4)
        Link.objects.create(fabric=topo.fabric, port_a=pa, port_b=pb)
        specs.append(EventSpec(code="link.down", message=f"leaf01 [{i}] down", category="topology",
                               object_type="link", object_key=f"{leaf.node_guid}/{i}-{host.node_guid}/1",
                               node_id=leaf.pk, port_id=pa.pk))  # fmt: skip
    result = raise_and_send(topo, specs)
    assert (result["messages"], result["summaries"], result["single"]) == (1, 1, 0)
    assert retry_due() == {"delivered": 1}
    body = hook.json()
    assert body["event"] == "alarm.summary" and len(body["data"]["alarms"]) == 8
    assert body["data"]["reason"].startswith("8 notifications arrived together (the storm threshold is 5)")
    assert sorted(a["port"] for a in body["data"]["alarms"]) == list(range(3, 11))
    assert Notification.objects.filter(target=t, status="summarised").count() == 8


def test_a_targets_rate_limit_holds_then_sends_and_a_disabled_target_drops(topo, hook, settings):
    """Mail's per-recipient budget, per target: with one critical message per window the second
    raise waits until the window has passed; rows of a target disabled meanwhile are dropped."""
    ensure_policies()
    settings.WEFT_MAIL_CRITICAL_RATE_LIMIT = 1
    t = AlertTarget.objects.create(name="noc", kind="webhook", url=hook.url, secret="on-call-key")
    assert raise_and_send(topo, [link_down(topo, ("spine01", 1), ("leaf01", 1))])["single"] == 1
    result = raise_and_send(topo, [link_down(topo, ("spine01", 2), ("leaf02", 1))])
    assert (result["messages"], result["held"]) == (0, 1)
    later = timezone.now() + timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S + 1)
    assert send_pending_targets(now=later)["single"] == 1
    assert retry_due(later) == {"delivered": 2}
    assert [json.loads(g["body"])["data"]["alarm"]["port"] for g in hook.got] == [1, 2]
    assert not Notification.objects.filter(target=t, status="pending").exists()
    # a clear queued while the target was enabled, the target disabled before the send: dropped
    record_events(topo.fabric, [link_up(topo, ("spine01", 1), ("leaf01", 1))])
    process_pending_events(topo.fabric.pk)
    assert Notification.objects.filter(target=t, status="pending", kind="cleared").count() == 1
    AlertTarget.objects.filter(pk=t.pk).update(enabled=False)
    assert send_pending_targets()["dropped"] == 1
    assert Notification.objects.get(target=t, kind="cleared").error == "target disabled"
    record_events(topo.fabric, [link_up(topo, ("spine01", 2), ("leaf02", 1))])
    process_pending_events(topo.fabric.pk)  # the engine queues nothing for a disabled target
    assert Notification.objects.filter(target=t, kind="cleared").count() == 1


# -- syslog ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("proto", ["udp", "tcp"])
def test_syslog_target_gets_every_event_as_rfc5424(topo, proto):
    ensure_policies()
    rx = SyslogReceiver(proto)
    try:
        t = AlertTarget.objects.create(name=f"log-{proto}", kind="syslog", url=rx.url, min_severity="info")
        record_events(topo.fabric, [
            link_down(topo, ("spine01", 1), ("leaf01", 1)),
            EventSpec(code="node.added", message="new node", category="topology", object_type="node",
                      object_key=topo.nodes["host02"].node_guid, node_id=topo.nodes["host02"].pk),
        ])  # fmt: skip
        process_pending_events(topo.fabric.pk)
        (row,) = WebhookDelivery.objects.filter(target=t.delivery_key)
        assert row.url == f"syslog+{rx.url}"
        assert retry_due() == {"delivered": 1}
        wait_for(lambda: len(rx.messages) == 2, timeout=5, what="two syslog messages")
        assert rx.errors == []
        down, added = sorted(rx.messages, key=lambda m: m["msgid"] != "link.down")
        assert (down["msgid"], down["severity"], down["facility"], down["app"]) == (
            "link.down",
            2,
            16,
            "weft",
        )
        assert down["sd"]["weft@32473"] == {"fabric": "lab", "node": "spine01", "port": "1",
                                            "severity": "critical", "code": "link.down",
                                            "object": topo.link_key(("spine01", 1), ("leaf01", 1))}  # fmt: skip
        assert added["msgid"] == "node.added" and added["severity"] == 6 and added["sd"]["weft@32473"]["node"]
        # the clear, as an alarm.cleared notice with the link.up event
        record_events(topo.fabric, [link_up(topo, ("spine01", 1), ("leaf01", 1))])
        process_pending_events(topo.fabric.pk)
        assert retry_due() == {"delivered": 1}
        wait_for(lambda: len(rx.messages) == 4, timeout=5, what="the clear's messages")
        assert {m["msgid"] for m in rx.messages[2:]} == {"link.up", "alarm.cleared"}
        assert send_test(t).status == "delivered"
        wait_for(lambda: rx.messages[-1]["msgid"] == "weft.test", timeout=5, what="the test message")
    finally:
        rx.close()


def test_syslog_tcp_receiver_down_is_retried():
    rx = SyslogReceiver("tcp")
    url = rx.url
    rx.close()  # nobody listens there now
    t = AlertTarget.objects.create(name="log", kind="syslog", url=url)
    row = send_test(t)
    assert row.status == "pending" and "refused" in row.last_error.lower() and row.next_attempt_at


@pytest.mark.slow
@pytest.mark.skipif(RSYSLOGD is None, reason="rsyslogd is not installed (bin/setup)")
def test_rsyslogd_parses_weft_messages_over_udp_and_tcp(topo):
    """Debian's rsyslogd, its RFC 5424 parser reading what Weft sends over UDP and over TCP with
    octet counting (two events in one TCP delivery: two messages, not one)."""
    ensure_policies()
    with rsyslogd() as rs:
        AlertTarget.objects.create(name="udp", kind="syslog", url=rs.udp_url, min_severity="info")
        AlertTarget.objects.create(name="tcp", kind="syslog", url=rs.tcp_url, min_severity="info")
        record_events(topo.fabric, [
            link_down(topo, ("spine01", 1), ("leaf01", 1)),
            EventSpec(code="node.added", message='new node "x" [y]', category="topology", object_type="node",
                      object_key=topo.nodes["host02"].node_guid),
        ])  # fmt: skip
        process_pending_events(topo.fabric.pk)
        assert retry_due() == {"delivered": 2}
        got = wait_for(
            lambda: len(rs.received()) == 4 and rs.received(), timeout=10, what="4 messages in rsyslogd"
        )
        assert sorted(r["msgid"] for r in got) == ["link.down", "link.down", "node.added", "node.added"]
        down = next(r for r in got if r["msgid"] == "link.down")
        assert (down["version"], down["facility"], down["severity"], down["app"]) == ("1", "16", "2", "weft")
        key = topo.link_key(("spine01", 1), ("leaf01", 1))
        assert down["sd"] == (f'[weft@32473 fabric="lab" node="spine01" port="1" severity="critical" '
                              f'code="link.down" object="{key}"]')  # fmt: skip
        assert down["msg"] == "link ('spine01', 1) ('leaf01', 1) went down"
        assert next(r for r in got if r["msgid"] == "node.added")["msg"] == 'new node "x" [y]'


# -- Alertmanager ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(ALERTMANAGER is None, reason="prometheus-alertmanager is not installed (bin/setup)")
def test_alertmanager_gets_firing_alert_with_labels_and_the_clear_resolves_it(topo):
    ensure_policies()
    with alertmanager() as am:
        t = AlertTarget.objects.create(name="am", kind="alertmanager", url=am, min_severity="warning")
        assert send_test(t).response_code == 200
        raise_and_send(topo, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
        assert retry_due() == {"delivered": 1}
        alarm = Alarm.objects.get(code="link.down")
        (alert,) = [a for a in alertmanager_alerts(am) if a["labels"]["alertname"] == "link.down"]
        assert alert["labels"] == {
            "alertname": "link.down", "fabric": "lab", "node": "spine01", "port": "1", "severity": "critical",
            "object": alarm.object_key, "source": "weft",
        }  # fmt: skip
        assert alert["status"]["state"] == "active"
        assert alert["generatorURL"].endswith(f"/alarms/{alarm.pk}/")
        assert alert["annotations"]["summary"].startswith("[Weft CRITICAL] Link down:")
        # re-posting keeps it firing (and does not duplicate it)
        assert resend_firing() == 1 and retry_due() == {"delivered": 1}
        assert len([a for a in alertmanager_alerts(am) if a["labels"]["alertname"] == "link.down"]) == 1
        raise_and_send(topo, [link_up(topo, ("spine01", 1), ("leaf01", 1))])
        assert retry_due() == {"delivered": 1}
        assert Alarm.objects.get(pk=alarm.pk).state == "cleared"
        # Alertmanager lists only unresolved alerts: the clear's endsAt resolved it
        assert not [a for a in alertmanager_alerts(am) if a["labels"]["alertname"] == "link.down"]
        assert Event.objects.filter(code="link.up").exists()


# -- API and page ---------------------------------------------------------------------------------
def test_api_manages_targets_admin_only_audited_and_sends_a_test(users, client_for, hook):
    from accounts.models import AuditEntry

    assert client_for("operator").get("/api/fabric/alert-targets/").status_code == 403
    admin = client_for("admin")
    bad = admin.post(
        "/api/fabric/alert-targets/", {"name": "x", "kind": "syslog", "url": "http://h/"}, format="json"
    )
    assert bad.status_code == 400 and "udp://host:port" in str(bad.json()["url"])
    bad = admin.post(
        "/api/fabric/alert-targets/", {"name": "x", "kind": "slack", "url": "ftp://h/"}, format="json"
    )
    assert bad.status_code == 400 and "http" in str(bad.json()["url"])
    resp = admin.post("/api/fabric/alert-targets/", {"name": "noc", "kind": "webhook", "url": hook.url,
                      "secret": "on-call-key", "min_severity": "minor"}, format="json")  # fmt: skip
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["secret_set"] is True and "secret" not in body and body["min_severity"] == "minor"
    entry = AuditEntry.objects.get(action="alert_target.create")
    assert "on-call-key" not in json.dumps(entry.changes) and entry.changes["secret_set"] is True
    pk = body["id"]
    result = admin.post(f"/api/fabric/alert-targets/{pk}/test/").json()
    assert (result["status"], result["response_code"], result["event"]) == ("delivered", 200, "alarm.test")
    assert hook.got[-1]["signed"] and hook.json()["data"]["alarm"]["code"] == "weft.test"
    assert (
        admin.patch(f"/api/fabric/alert-targets/{pk}/", {"secret": "rotated"}, format="json").status_code
        == 200
    )
    assert AuditEntry.objects.get(action="alert_target.update").changes == {"secret": "changed"}
    result = admin.post(f"/api/fabric/alert-targets/{pk}/test/").json()
    assert (result["status"], result["response_code"]) == (
        "failed",
        401,
    )  # the receiver still has the old key
    log = admin.get(f"/api/fabric/alert-targets/{pk}/deliveries/").json()
    assert [(d["event"], d["status"]) for d in log] == [("alarm.test", "failed"), ("alarm.test", "delivered")]
    assert admin.get(f"/api/fabric/alert-targets/{pk}/deliveries/?limit=x").status_code == 400
    assert admin.delete(f"/api/fabric/alert-targets/{pk}/").status_code == 204


def test_page_adds_a_target_sends_a_test_and_shows_the_log(users, client_for):
    rx = SyslogReceiver("udp")
    try:
        assert client_for("operator").get("/alert-targets/").status_code == 403
        admin = client_for("admin")
        page = admin.get("/alert-targets/").content.decode()
        assert "No alert targets" in page and 'id="target-add"' in page
        resp = admin.post("/alert-targets/add/", {"name": "log", "kind": "syslog", "url": "udp://nohost",
                                                  "min_severity": "info", "enabled": "on"})  # fmt: skip
        assert resp.status_code == 400 and "udp://host:port" in resp.content.decode()
        resp = admin.post("/alert-targets/add/", {"name": "log", "kind": "syslog", "url": rx.url,
                                                  "min_severity": "info", "enabled": "on"})  # fmt: skip
        t = AlertTarget.objects.get(name="log")
        assert resp.status_code == 302 and resp["Location"] == f"/alert-targets/{t.pk}/"
        resp = admin.post(f"/alert-targets/{t.pk}/test/")
        page = admin.get(resp["Location"]).content.decode()
        assert (
            'id="test-result"' in page and "Test delivered" in page and "the syslog transport took it" in page
        )
        wait_for(lambda: rx.messages, timeout=5, what="the test message")
        assert rx.messages[0]["msgid"] == "weft.test" and rx.errors == []
        assert page.count('data-status="delivered"') == 1
        assert "log" in admin.get("/alert-targets/").content.decode()
        resp = admin.post(f"/alert-targets/{t.pk}/delete/")
        assert resp.status_code == 302 and not AlertTarget.objects.exists()
    finally:
        rx.close()
