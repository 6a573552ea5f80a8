"""Alert mail through a real SMTP server (aiosmtpd on loopback): recipients, storm, suppression."""

from __future__ import annotations

import socket

import pytest

from events.engine import process_pending_events
from events.models import Alarm, EventPolicy, Notification
from events.notify import send_digest, send_pending
from events.policies import ensure_policies
from events.services import EventSpec, record_events

pytestmark = pytest.mark.django_db


def _policy(code, **kw):
    ensure_policies()
    EventPolicy.objects.filter(code=code).update(**kw)


def link_down(topo, a, b):
    return EventSpec(
        code="link.down",
        message=f"link {a} {b} went down",
        category="topology",
        object_type="link",
        object_key=topo.link_key(a, b),
        object_repr="",
    )


def test_link_down_mail_names_both_ends_and_links_alarm(topo, smtp, users):
    from django.contrib.auth.models import Group

    _policy("link.down", recipient_emails="noc@example.org")
    EventPolicy.objects.get(code="link.down").recipient_groups.add(Group.objects.get(name="Operator"))
    record_events(topo.fabric, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
    process_pending_events(topo.fabric.pk)
    result = send_pending()
    assert result["single"] == 2 and result["summaries"] == 0
    rcpts = sorted(r for to, _ in smtp.messages for r in to)
    assert rcpts == ["noc@example.org", "olga@example.org"]
    msg = smtp.messages[0][1]
    subject = msg["Subject"]
    assert subject.startswith("[Weft CRITICAL] Link down:") and "fabric lab" in subject
    assert "spine01 [1]" in subject and "leaf01 [1]" in subject
    alarm = Alarm.objects.get()
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert f"https://weft.example.org/alarms/{alarm.pk}/" in text
    assert f'href="https://weft.example.org/alarms/{alarm.pk}/"' in html
    assert Notification.objects.filter(status="sent").count() == 2
    # Sending again sends nothing new.
    assert send_pending()["mails"] == 0 and len(smtp.messages) == 2


def test_clear_notice_per_policy(topo, smtp):
    _policy("link.down", recipient_emails="noc@example.org", notify_clear=True)
    key_event = link_down(topo, ("spine01", 1), ("leaf01", 1))
    record_events(topo.fabric, [key_event])
    process_pending_events(topo.fabric.pk)
    send_pending()
    up = EventSpec(
        code="link.up",
        message="back",
        category="topology",
        object_type="link",
        object_key=key_event.object_key,
    )
    record_events(topo.fabric, [up])
    process_pending_events(topo.fabric.pk)
    send_pending()
    subjects = [m["Subject"] for _, m in smtp.messages]
    assert len(subjects) == 2 and subjects[1].startswith("[Weft CLEARED] Link down:")
    # Without clear notices: nothing on clear.
    _policy("link.down", notify_clear=False)
    record_events(topo.fabric, [key_event])
    process_pending_events(topo.fabric.pk)
    record_events(topo.fabric, [up])
    process_pending_events(topo.fabric.pk)
    send_pending()
    assert [m["Subject"].split("]")[0] for _, m in smtp.messages] == [
        "[Weft CRITICAL",
        "[Weft CLEARED",
        "[Weft CRITICAL",
    ]


def test_storm_sends_one_summary(topo, smtp):
    """A leaf switch dies: many links at once → one summary mail per recipient."""
    from fabric.models import Link, Node, Port

    _policy("link.down", recipient_emails="noc@example.org")
    leaf = topo.nodes["leaf01"]
    specs = []
    for i in range(3, 15):  # 12 more host links on leaf01
        host = Node.objects.create(
            fabric=topo.fabric,
            node_guid=f"0x{0x9000 + i:016x}",
            node_type="ca",
            description=f"host{i:02d} mlx5_0",
        )
        pa = Port.objects.create(node=leaf, port_num=i, state=4)
        pb = Port.objects.create(node=host, port_num=1, state=4, lid=100 + i)
        Link.objects.create(fabric=topo.fabric, port_a=pa, port_b=pb)
        specs.append(
            EventSpec(
                code="link.down",
                message=f"leaf01 [{i}] down",
                category="topology",
                object_type="link",
                object_key=topo.link_key(("leaf01", 1), ("spine01", 1)) + str(i),
                object_repr=f"leaf01 [{i}] <-> host{i:02d} mlx5_0 [1]",
            )
        )
    record_events(topo.fabric, specs)
    process_pending_events(topo.fabric.pk)
    result = send_pending()
    assert result == {"mails": 1, "single": 0, "summaries": 1, "held": 0, "failed": 0}
    ((to, msg),) = smtp.messages
    assert to == ["noc@example.org"]
    assert msg["Subject"] == "[Weft] 12 alarm(s) on fabric lab: 12 critical"
    body = msg.get_body(("plain",)).get_content()
    assert all(f"leaf01 [{i}] <-> host{i:02d}" in body for i in range(3, 15))
    assert Notification.objects.filter(status="summarised").count() == 12


def test_rate_limit_holds_then_summarises(topo, smtp, settings, caplog):
    settings.WEFT_MAIL_RATE_LIMIT = 2
    _policy("node.removed", recipient_emails="noc@example.org")
    for i in range(4):
        record_events(
            topo.fabric,
            [
                EventSpec(
                    code="node.removed",
                    message=f"n{i} gone",
                    object_type="node",
                    object_key=f"0x{i:016x}",
                    object_repr=f"n{i}",
                )
            ],
        )
        process_pending_events(topo.fabric.pk)
        send_pending()
    # Two single mails, then the budget is spent: the rest waits, and the log says so (issue 26
    # §4: cleared-alarm mail was held silently).
    assert len(smtp.messages) == 2
    assert Notification.objects.filter(status="pending").count() == 2
    held = [r.getMessage() for r in caplog.records if "held by the rate limit" in r.getMessage()]
    assert held and held[-1] == (
        "mail to noc@example.org held by the rate limit (2 non-critical mail(s) per 600 s): "
        "2 notification(s) waiting, 0 of them cleared-alarm notices; they go as one summary when "
        "the window allows"
    ), held
    from datetime import timedelta

    from django.utils import timezone

    later = timezone.now() + timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S + 1)
    result = send_pending(now=later)
    assert result["summaries"] == 1 and len(smtp.messages) == 3
    assert "2 alarm(s)" in smtp.messages[2][1]["Subject"]


def _node_removed(topo, i):
    record_events(
        topo.fabric,
        [EventSpec(code="node.removed", message=f"n{i} gone", object_type="node",
                   object_key=f"0x{i:016x}", object_repr=f"n{i}")],
    )  # fmt: skip
    process_pending_events(topo.fabric.pk)


def test_minor_mail_does_not_hold_a_critical_alarm_back(topo, smtp):
    """Ten Minor alarms spend the rate limit; a Critical link-down right after still goes at once,
    as its own mail (not in a summary, not after the window)."""
    _policy("node.removed", recipient_emails="noc@example.org")
    _policy("link.down", recipient_emails="noc@example.org")
    for i in range(10):
        _node_removed(topo, i)
        send_pending()
    assert len(smtp.messages) == 10
    _node_removed(topo, 10)  # the eleventh Minor one waits
    record_events(topo.fabric, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
    process_pending_events(topo.fabric.pk)
    result = send_pending()
    assert result == {"mails": 1, "single": 1, "summaries": 0, "held": 1, "failed": 0}
    subject = smtp.messages[-1][1]["Subject"]
    assert subject.startswith("[Weft CRITICAL] Link down:")
    assert list(Notification.objects.filter(status="pending").values_list("alarm__code", flat=True)) == [
        "node.removed"
    ]


def test_critical_mail_has_its_own_budget(topo, smtp, settings):
    settings.WEFT_MAIL_CRITICAL_RATE_LIMIT = 1
    _policy("link.down", recipient_emails="noc@example.org")
    _policy("node.removed", recipient_emails="noc@example.org")
    record_events(topo.fabric, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
    process_pending_events(topo.fabric.pk)
    send_pending()
    record_events(topo.fabric, [link_down(topo, ("spine01", 2), ("leaf02", 1))])
    process_pending_events(topo.fabric.pk)
    _node_removed(topo, 1)
    result = send_pending()  # the second Critical waits; the Minor one has budget of its own
    assert result["held"] == 1 and result["single"] == 1
    assert smtp.messages[-1][1]["Subject"].startswith("[Weft MINOR] Node removed:")


def test_summary_gives_the_real_reason(topo, smtp, settings):
    """A summary of held mail says the rate limit held N since T, not that they opened at once."""
    from datetime import UTC, timedelta

    from django.utils import timezone

    settings.WEFT_MAIL_RATE_LIMIT = 1
    _policy("node.removed", recipient_emails="noc@example.org")
    for i in range(3):
        _node_removed(topo, i)
        send_pending()
    assert len(smtp.messages) == 1
    first_held = Notification.objects.filter(status="pending").order_by("created").first().created
    later = timezone.now() + timedelta(seconds=settings.WEFT_MAIL_RATE_WINDOW_S + 1)
    send_pending(now=later)
    body = smtp.messages[1][1].get_body(("plain",)).get_content()
    assert "opened at once" not in body
    since = first_held.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    assert (
        f"The mail rate limit (1 non-critical mails per 600 s to one recipient) held 2 notification(s) "
        f"since {since} UTC" in " ".join(body.split())
    )
    # A burst says it was a burst.
    settings.WEFT_MAIL_RATE_LIMIT = 10
    for i in range(10, 16):
        _node_removed(topo, i)
    send_pending()
    body = smtp.messages[2][1].get_body(("plain",)).get_content()
    assert "6 notifications arrived together (the storm threshold is 5)" in " ".join(body.split())


def test_disabled_or_silent_types_send_nothing(topo, smtp):
    _policy("link.down", enabled=False, recipient_emails="noc@example.org")
    _policy("node.added", recipient_emails="noc@example.org")  # email off by default
    record_events(
        topo.fabric,
        [
            link_down(topo, ("spine01", 1), ("leaf01", 1)),
            EventSpec(code="node.added", message="new", object_type="node", object_key="0x1"),
        ],
    )
    process_pending_events(topo.fabric.pk)
    assert send_pending()["mails"] == 0 and smtp.messages == []


def test_daily_digest(topo, smtp):
    _policy("port.state_changed", digest=True, recipient_emails="boss@example.org")
    record_events(
        topo.fabric,
        [
            EventSpec(
                code="port.state_changed",
                message="leaf01 [2] Active -> Down",
                object_type="port",
                object_key="x/2",
            )
        ]
        * 3,
    )
    process_pending_events(topo.fabric.pk)
    assert send_digest() == {"mails": 1, "events": 3}
    ((to, msg),) = smtp.messages
    assert to == ["boss@example.org"] and msg["Subject"].startswith("[Weft digest] 3 event(s)")
    assert "3 x Port state changed" in msg.get_body(("plain",)).get_content()
    assert send_digest()["mails"] == 0  # not twice a day


def test_smtp_down_marks_failed(topo, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", s.getsockname()[1]
    settings.EMAIL_TIMEOUT = 2
    _policy("link.down", recipient_emails="noc@example.org")
    record_events(topo.fabric, [link_down(topo, ("spine01", 1), ("leaf01", 1))])
    process_pending_events(topo.fabric.pk)
    assert send_pending()["failed"] == 1
    assert Notification.objects.get().status == "failed"
