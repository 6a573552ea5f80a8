"""The map's groups at Selene scale (issue 14): groups are the scheduler's locality domains,
the collapsed drawing is bounded, and the live part (utilisation, congestion, alarms) and the
link panel's endpoint read the stored counters and alarms."""

from __future__ import annotations

import gzip
import json

import pytest
from django.utils import timezone

from events.models import Alarm
from fabric.api.maplayout import GROUP_ABOVE, build_map, collapse
from fabric.models import Link
from fabric.services.ingest import import_topology_text
from scheduler.topology import build_locality
from telemetry.models import PortCounters

SELENE = "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz"
SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


@pytest.fixture
def selene(realdata, db):
    text = gzip.decompress((realdata / SELENE).read_bytes()).decode()
    return import_topology_text("selene", text, filename=SELENE).fabric


@pytest.mark.slow
def test_selene_groups_are_the_locality_domains_and_collapse_small(selene):
    payload = build_map(selene)
    groups = payload["groups"]
    loc = build_locality([selene])
    n_nodes = len(payload["nodes"]["id"])
    assert n_nodes == 5007 and groups["collapsed"] and n_nodes > GROUP_ABOVE
    # one group per locality unit, block and spine group (none is empty on Selene)
    for kind, tier in (("unit", 1), ("block", 2), ("spine_group", 3)):
        domains = [d for d in loc.at_tier(tier) if d.fabric_id == selene.pk]
        assert groups["kind"].count(kind) == len(domains), kind
        assert {k for k, g in zip(groups["key"], groups["kind"], strict=True) if g == kind} == {
            d.key for d in domains
        }
    assert groups["kind"].count("unit") == 28  # 25 rail pods of 8 leaves + 3 plain leaves
    # every node is in exactly one group; member counts add up
    assert len(groups["member"]) == n_nodes and min(groups["member"]) >= 0
    assert sum(groups["n"]) == n_nodes
    for g, n in enumerate(groups["n"]):
        assert groups["member"].count(g) == n
    # a unit holds its leaves and the CAs of its hosts
    unit = next(d for d in loc.units() if len(d.switches) == 8)
    g = groups["key"].index(unit.key)
    members = {payload["nodes"]["guid"][i] for i, m in enumerate(groups["member"]) if m == g}
    assert set(unit.switches) <= members
    assert groups["n"][g] == 8 + sum(
        1 for i, m in enumerate(groups["member"]) if m == g and payload["nodes"]["type"][i] == 0
    )

    collapsed = collapse(payload)
    assert collapsed["nodes"] == len(groups["key"]) <= 60
    assert len(collapsed["edges"]) <= collapsed["nodes"] * (collapsed["nodes"] - 1) // 2
    # every inter-group cable is kept, none inside a group is drawn
    member = groups["member"]
    E = payload["edges"]
    crossing = sum(n for a, b, n in zip(E["a"], E["b"], E["n"], strict=True) if member[a] != member[b])
    assert sum(collapsed["edges"].values()) == crossing > 0
    # the collapsed drawing's data is small beside the full payload
    small = json.dumps({"groups": {k: v for k, v in groups.items() if k != "member"},
                        "edges": [[a, b, n] for (a, b), n in collapsed["edges"].items()]})  # fmt: skip
    assert len(small) < 30_000 < len(json.dumps(payload)) // 10


def test_small_fabric_opens_expanded_and_live_part(realdata, db, client_for):
    fabric = import_topology_text("small", (realdata / SMALL).read_text(), filename=SMALL).fabric
    viewer = client_for("viewer")
    body = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/map/").json()
    assert body["groups"]["collapsed"] is False
    assert len(body["groups"]["member"]) == len(body["nodes"]["id"])
    live = body["live"]
    n = len(body["edges"]["a"])
    assert (len(live["util"]), len(live["cong"]), len(live["alarms"])) == (n, n, n)
    assert set(live["util"]) == {None} and set(live["alarms"]) == {0}  # a file import: no rates

    # a counter sweep's rates and an open alarm on one cable show on its edge, at the next request
    link = (
        Link.objects.filter(fabric=fabric)
        .select_related("port_a__node", "port_b__node")
        .order_by("id")
        .first()
    )
    PortCounters.objects.create(port=link.port_a, utilisation=0.42, congestion=0.05)
    PortCounters.objects.create(port=link.port_b, utilisation=0.61, congestion=None)
    now = timezone.now()
    Alarm.objects.create(
        fabric=fabric, code="port.errors", severity="minor", state="active", port=link.port_a,
        object_type="port", object_key="x", message="symbol errors rising", first_seen=now, last_seen=now,
    )  # fmt: skip
    index = {pk: k for k, pk in enumerate(body["nodes"]["id"])}
    a, b = index[link.port_a.node_id], index[link.port_b.node_id]
    e = next(e for e in range(n) if {body["edges"]["a"][e], body["edges"]["b"][e]} == {a, b})
    live = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/map/", {"part": "edges"}).json()["live"]
    assert (live["util"][e], live["cong"][e], live["alarms"][e]) == (0.61, 0.05, 1)
    assert sum(1 for u in live["util"] if u is not None) == 1

    # the link panel's endpoint: both ends, their counters, the alarm
    url = f"/api/fabric/fabrics/{fabric.pk}/map-edge/"
    detail = viewer.get(url, {"a": link.port_b.node_id, "b": link.port_a.node_id}).json()
    assert (
        detail["a"]["guid"] == link.port_b.node.node_guid
        and detail["b"]["guid"] == link.port_a.node.node_guid
    )
    cable = next(c for c in detail["cables"] if c["a"]["port_id"] == link.port_b_id)
    assert (cable["a"]["utilisation"], cable["b"]["utilisation"], cable["b"]["congestion"]) == (
        0.61,
        0.42,
        0.05,
    )
    assert cable["b"]["port_num"] == link.port_a.port_num
    assert [x["code"] for x in detail["alarms"]] == ["port.errors"]
    assert viewer.get(url, {"a": "x", "b": 1}).status_code == 400
    assert viewer.get(url, {"a": link.port_a.node_id, "b": 10**9}).status_code == 404


def test_a_switch_role_change_regroups_the_cached_map(realdata, db, client_for):
    fabric = import_topology_text("small", (realdata / SMALL).read_text(), filename=SMALL).fabric
    url = f"/api/fabric/fabrics/{fabric.pk}/map/"
    viewer = client_for("viewer")
    before = viewer.get(url).json()
    loc = build_locality([fabric])
    unit = next(d for d in loc.units() if d.fabric_id == fabric.pk)
    leaf = unit.switches[0]
    i = before["nodes"]["guid"].index(leaf)
    assert before["groups"]["kind"][before["groups"]["member"][i]] == "unit"
    resp = client_for("admin").post(
        f"/api/fabric/fabrics/{fabric.pk}/switch-roles/",
        {"switches": [leaf], "role": "storage"},
        format="json",
    )
    assert resp.status_code == 200, resp.content
    after = viewer.get(url).json()
    g = after["groups"]["member"][i]
    assert (after["groups"]["kind"][g], after["groups"]["name"][g]) == ("tier", "other leaves")
