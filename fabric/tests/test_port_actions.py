"""Port actions against the lab (ibsim + the real OpenSM + infiniband-diags under umad2sim):
a switch port disabled from the port page is Disabled for ``smpquery`` and Down in Weft (its link
gone, audited), then enabled again; its counters cleared by ``perfquery -R``; refused with a
reason (409) for a CA port, the SM's own path and the port Weft reaches a switch through; 403 for a
Viewer, 400 without confirmation. The route parsers are tested on the lab's own output too.

The lab: 2 leaves × 4 single-HCA hosts, 1 spine; OpenSM and the diags both on host001's HCA, so
the SM's path is the cable host001 ↔ leaf-01 [1]. ibsim has no link training (an enabled port
stays Polling): the lab's console server is running, as under the demo, so Weft asks the lab to
train an enabled port (``lab.receivers``) and the link comes back LinkUp, as a real one would;
``relink`` of a disabled port through the console trains it too.
"""

from __future__ import annotations

import re

import pytest

from accounts.models import AuditEntry
from events.models import Event
from fabric.choices import NodeType, PhysState, PortState
from fabric.collectors.route import local_port, route_ports
from fabric.models import Fabric, IsolatedPort, Port
from fabric.parsers.route import parse_ibaddr, parse_ibtracert
from fabric.services.discovery import discover
from lab import netgen
from lab.console_server import ConsoleServer, request
from lab.core import CONSOLE_SOCKET_ENV
from tests.support.waits import wait_for

TRACE = """From ca {0x1c34da0300400010} portnum 1 lid 1-1 "host001 mlx5_0"
[1] -> switch port {0x0c42a10300a00100}[1] lid 3-3 "leaf-01"
[5] -> switch port {0x0c42a10300a00000}[1] lid 2-2 "spine-01"
[2] -> switch port {0x0c42a10300a00200}[5] lid 4-4 "leaf-02"
[1] -> ca port {0x1c34da0300400411}[1] lid 8-8 "host005 mlx5_0"
To ca {0x1c34da0300400410} portnum 1 lid 8-8 "host005 mlx5_0"
"""


def test_parse_ibtracert_lists_switch_ports_in_and_out():
    assert parse_ibtracert(TRACE) == [
        ("0x0c42a10300a00100", 1), ("0x0c42a10300a00100", 5),
        ("0x0c42a10300a00000", 1), ("0x0c42a10300a00000", 2),
        ("0x0c42a10300a00200", 5), ("0x0c42a10300a00200", 1),
    ]  # fmt: skip
    assert parse_ibtracert(TRACE.splitlines()[0] + "\n" + TRACE.splitlines()[-1]) == []


def test_parse_ibaddr_port_guid_from_the_gid():
    local = parse_ibaddr("GID fe80::1c34:da03:40:11 LID start 0x1 end 0x1\n")
    assert (local.port_guid, local.lid) == ("0x1c34da0300400011", 1)
    local = parse_ibaddr("GID fe80:0000:0000:0000:0002:c903:00a1:b2c3 LID start 0x1f end 0x1f")
    assert (local.port_guid, local.lid) == ("0x0002c90300a1b2c3", 31)


@pytest.fixture
def lab_fabric(lab_factory, committed_signals, users, tmp_path):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))
    console = ConsoleServer(lab, tmp_path / "console.sock").start()  # as the demo and fabric_lab do
    assert lab.tool_env[CONSOLE_SOCKET_ENV] == str(tmp_path / "console.sock")
    fabric = Fabric.objects.create(name="actions-lab", tool_env=dict(lab.tool_env))
    discover(fabric)
    fabric.refresh_from_db()
    assert fabric.master_sm_lid, "the discovery read the master SM"
    yield lab, fabric
    console.stop()


def _phys(lab, lid: int, port: int) -> str:
    out = lab.run(["smpquery", "portinfo", str(lid), str(port)]).stdout
    return next(line.split(".")[-1] for line in out.splitlines() if line.startswith("PhysLinkState"))


def _state(lab, lid: int, port: int) -> str:
    out = lab.run(["smpquery", "portinfo", str(lid), str(port)]).stdout
    return next(line.split(".")[-1] for line in out.splitlines() if line.startswith("LinkState"))


def _switch_port_of(fabric, host: str) -> Port:
    ca = Port.objects.with_link().get(node__fabric=fabric, node__host__name=host, node__node_type=NodeType.CA)
    return ca.remote


def _post(client, port: Port, action: str, confirm: bool = True):
    data = {"action": action, **({"confirm": "1"} if confirm else {})}
    return client.post(f"/fabric/ports/{port.pk}/action/", data)


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_disable_enable_clear_and_refusals(lab_fabric, client_for):
    lab, fabric = lab_fabric
    operator, viewer = client_for("operator"), client_for("viewer")

    # the collectors on the lab: the local port is host001's, the route reaches leaf-02 by its uplink
    local = local_port(fabric)
    target = _switch_port_of(fabric, "host005")  # leaf-02 [1]
    leaf2 = target.node
    route = route_ports(fabric, local.lid, leaf2.lid)
    assert route[-1][0] == leaf2.node_guid and route[-1][1] != target.port_num

    # refusals, each with its reason, nothing sent
    ca = Port.objects.get(node__fabric=fabric, node__host__name="host005", node__node_type=NodeType.CA)
    sm_side = _switch_port_of(fabric, "host001")
    uplink = Port.objects.get(node=leaf2, port_num=route[-1][1])
    for port, status, reason in [
        (ca, 409, "is a port of a CA"),
        (sm_side, 409, "on the SM&#x27;s own path: it is cabled to host001"),
        (uplink, 409, "the port through which this host reaches"),
    ]:
        response = _post(operator, port, "disable")
        html = response.content.decode()
        assert response.status_code == status and reason in html, (port, re.findall(r"Refused[^<]*", html))
    assert _phys(lab, sm_side.node.lid, sm_side.port_num) == "LinkUp"
    assert _phys(lab, leaf2.lid, uplink.port_num) == "LinkUp"
    api = operator.post(
        f"/api/fabric/ports/{ca.pk}/actions/", {"action": "disable", "confirm": True}, format="json"
    )
    assert api.status_code == 409 and "is a port of a CA" in api.json()["detail"]
    api = operator.post(f"/api/fabric/ports/{target.pk}/actions/", {"action": "disable"}, format="json")
    assert api.status_code == 400 and "confirm" in api.json()
    assert (
        viewer.post(
            f"/api/fabric/ports/{target.pk}/actions/", {"action": "disable", "confirm": True}
        ).status_code
        == 403
    )
    assert _post(viewer, target, "disable").status_code == 403
    assert _post(operator, target, "disable", confirm=False).status_code == 400
    assert _post(operator, target, "explode").status_code == 400
    assert _phys(lab, leaf2.lid, target.port_num) == "LinkUp"

    # disable: smpquery sees it Disabled, Weft stores it Down with its link gone; audited
    response = _post(operator, target, "disable")
    assert response.status_code == 302, response.content[-800:]
    assert _phys(lab, leaf2.lid, target.port_num) == "Disabled"
    target.refresh_from_db()
    assert (target.state, target.phys_state) == (PortState.DOWN, PhysState.DISABLED)
    assert target.link is None
    # a deliberate isolation: Info port.isolated, no Critical link.down, listed with who and when
    assert not Event.objects.filter(code="link.down").exists()
    isolated = Event.objects.get(code="port.isolated")
    assert isolated.severity == "info" and "host005" in isolated.message, isolated.message
    row = IsolatedPort.objects.get(node_guid=leaf2.node_guid, port_num=target.port_num)
    assert (row.by.username, row.via) == ("olga", "page") and "host005" in row.peer
    entry = AuditEntry.objects.filter(action="port.disable").latest("pk")
    assert entry.changes["done"] is True and entry.changes["phys_state"] == "Disabled"

    # enable: the lab trains the link again (asked by Weft through its console), as a cable would
    assert _post(operator, target, "enable").status_code == 302
    wait_for(lambda: _phys(lab, leaf2.lid, target.port_num) == "LinkUp", 30, "the enabled link to train")
    wait_for(lambda: _state(lab, leaf2.lid, target.port_num) == "Active", 60, "the SM to bring it Active")
    assert (
        not IsolatedPort.objects.exists() and Event.objects.filter(code="port.isolation_cleared").count() == 1
    )
    # disabled again with ibportstate (no Weft), then "relink" through the console trains it
    lab.run(["ibportstate", str(leaf2.lid), str(target.port_num), "disable"])
    assert _phys(lab, leaf2.lid, target.port_num) == "Disabled"
    assert request(lab.console_socket, f"relink {leaf2.node_guid} {target.port_num}") == "ok"
    assert _phys(lab, leaf2.lid, target.port_num) == "LinkUp"

    # counter reset on another leaf-02 port: perfquery reads the set value, then 0
    other = _switch_port_of(fabric, "host006")
    lab.perf_set(lab_node(lab, other.node.node_guid), other.port_num, "SymbolErrorCounter", 7)
    assert _symbol_errors(lab, leaf2.lid, other.port_num) == 7
    assert _post(operator, other, "clear_counters").status_code == 302
    assert _symbol_errors(lab, leaf2.lid, other.port_num) == 0
    assert AuditEntry.objects.filter(action="port.clear_counters").count() == 1


def lab_node(lab, guid: str) -> str:
    """The lab's name (netfile id) of the node with ``guid``."""
    return next(n.node_id for n in lab.net.nodes if f"0x{n.guid:016x}" == guid)


def _symbol_errors(lab, lid: int, port: int) -> int:
    out = lab.run(["perfquery", str(lid), str(port)]).stdout
    return int(
        next(line.split(".")[-1] for line in out.splitlines() if line.startswith("SymbolErrorCounter"))
    )
