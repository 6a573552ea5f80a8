"""Fixtures of the events tests: a small stored fabric (1 spine, 2 leaves, 2 hosts), an alarm on it
and an SMTP sink (users and clients come from the root ``conftest.py``)."""

from __future__ import annotations

import email
import socket
from email import policy as email_policy

import pytest
from aiosmtpd.controller import Controller

from events.keys import link_key


@pytest.fixture
def topo(db):
    """A stored fat tree: spine01 -- leaf01/leaf02 -- host01/host02 (4x HDR, 200 Gb/s)."""
    from fabric.choices import NodeType, PortState, Tier
    from fabric.models import Fabric, Link, Node, Port

    fabric = Fabric.objects.create(name="lab")
    nodes = {}
    spec = [
        ("spine01", NodeType.SWITCH, 0x1000, 1, Tier.SPINE),
        ("leaf01", NodeType.SWITCH, 0x2000, 2, Tier.LEAF),
        ("leaf02", NodeType.SWITCH, 0x3000, 3, Tier.LEAF),
        ("host01 mlx5_0", NodeType.CA, 0x4000, None, Tier.HOST),
        ("host02 mlx5_0", NodeType.CA, 0x5000, None, Tier.HOST),
    ]
    for desc, kind, guid, lid, tier in spec:
        nodes[desc.split()[0]] = Node.objects.create(
            fabric=fabric,
            node_guid=f"0x{guid:016x}",
            node_type=kind,
            description=desc,
            num_ports=8 if kind == NodeType.SWITCH else 1,
            lid=lid,
            tier=tier,
        )
    ports = {}

    def port(node, num, lid=None):
        p = Port.objects.create(
            node=nodes[node],
            port_num=num,
            port_guid=f"0x{int(nodes[node].node_guid, 16) + (num if nodes[node].node_type == 'ca' else 0):016x}",
            lid=lid,
            state=PortState.ACTIVE,
            width="4x",
            speed="HDR",
            rate_gbps=200.0,
        )
        ports[(node, num)] = p
        return p

    for sw in ("spine01", "leaf01", "leaf02"):
        port(sw, 0)
    links = {}
    for a, b in [
        (("spine01", 1), ("leaf01", 1)),
        (("spine01", 2), ("leaf02", 1)),
        (("leaf01", 2), ("host01", 1)),
        (("leaf02", 2), ("host02", 1)),
    ]:
        pa = port(*a, lid=None)
        pb = port(*b, lid=(10 if b[0] == "host01" else 11) if b[0].startswith("host") else None)
        links[(a[0], b[0])] = Link.objects.create(
            fabric=fabric, port_a=pa, port_b=pb, width="4x", speed="HDR", rate_gbps=200.0
        )

    class Topo:
        pass

    t = Topo()
    t.fabric, t.nodes, t.ports, t.links = fabric, nodes, ports, links

    def key(a, b):
        pa, pb = ports[a], ports[b]
        return link_key((pa.node.node_guid, pa.port_num), (pb.node.node_guid, pb.port_num))

    t.link_key = key
    return t


class Sink:
    """aiosmtpd handler keeping every message: (envelope recipients, parsed message)."""

    def __init__(self):
        self.messages: list[tuple[list[str], email.message.EmailMessage]] = []

    async def handle_DATA(self, server, session, envelope):
        msg = email.message_from_bytes(envelope.content, policy=email_policy.default)
        self.messages.append((list(envelope.rcpt_tos), msg))
        return "250 OK"


@pytest.fixture
def smtp(settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sink = Sink()
    controller = Controller(sink, hostname="127.0.0.1", port=port)
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.WEFT_BASE_URL = "https://weft.example.org"
    settings.WEFT_MAIL_STORM_THRESHOLD = 5
    settings.WEFT_MAIL_RATE_LIMIT = 10
    yield sink
    controller.stop()


@pytest.fixture
def alarm(topo):
    """One active Critical link-down alarm on spine01[1] <-> leaf01[1], raised by the rules."""
    from events.engine import process_pending_events
    from events.models import Alarm
    from events.services import EventSpec, record_events

    record_events(
        topo.fabric,
        [
            EventSpec(
                code="link.down",
                message="spine01 [1] <-> leaf01 [1] went down",
                category="topology",
                object_type="link",
                object_key=topo.link_key(("spine01", 1), ("leaf01", 1)),
                object_repr="spine01 [1] <-> leaf01 [1]",
            )
        ],
    )
    process_pending_events(topo.fabric.pk)
    return Alarm.objects.get()
