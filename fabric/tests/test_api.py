"""REST API of the fabric app (``/api/fabric/``) on fabrics imported from real ibnetdiscover files.

Expected values come from the database the real ingest wrote (or from the file through the
parser), never typed in: the API must agree with the stored model.
"""

from __future__ import annotations

import gzip

import pytest
from django.db.models import Q
from django.urls import include, path
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from fabric.choices import DiscoverySource, NodeType, PortState, Tier
from fabric.models import Discovery, Fabric, Link, Node, Port
from fabric.services.ingest import import_topology_text

SMALL = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"  # 2 switches, 13 CAs, FDR/EDR/HDR, self-loops
NDR = "ibnetdiscover/nvidia_topograph_ndr_dgx.ibnetdiscover.out"  # 40 switches, 582 CAs, fat tree
BAD_LIDS = "ibnetdiscover/hk_topo8_anonymized_EDITED_invalid_lid.ibnetdiscover.txt"


@pytest.fixture
def small(realdata, db) -> Fabric:
    text = (realdata / SMALL).read_text()
    return import_topology_text("small", text, filename=SMALL).fabric


@pytest.fixture
def ndr(realdata, db) -> Fabric:
    text = (realdata / NDR).read_text()
    return import_topology_text("ndr", text, filename=NDR).fabric


def unpadded_upper(guid: str) -> str:
    """``0x0002c903...`` → ``2C903...``: the same 64-bit GUID written differently."""
    return format(int(guid, 16), "X")


# --- list, pagination, brief ------------------------------------------------------------------


def test_anonymous_is_refused(small):
    resp = APIClient().get("/api/fabric/nodes/")
    assert (resp.status_code, resp.json()) == (
        401,
        {"detail": "Authentication credentials were not provided."},
    )
    assert resp["WWW-Authenticate"] == 'Token realm="api"'  # the API's challenge: send a token


def test_node_list_is_paginated_limit_offset(small, client_for):
    client = client_for("viewer")
    total = Node.objects.filter(fabric=small).count()
    resp = client.get("/api/fabric/nodes/", {"fabric": small.pk, "limit": 5, "offset": 5})
    assert resp.status_code == 200
    body = resp.json()
    assert body["count"] == total
    assert len(body["results"]) == 5
    assert "offset=10" in body["next"] and "limit=5" in body["next"]
    assert body["previous"] is not None
    ids = [r["id"] for r in body["results"]]
    all_ids = list(
        Node.objects.filter(fabric=small)
        .order_by("fabric", "node_type", "description")
        .values_list("id", flat=True)
    )
    assert ids == all_ids[5:10]


def test_brief_forms(small, client_for):
    client = client_for("viewer")
    nodes = client.get("/api/fabric/nodes/", {"brief": 1, "limit": 3}).json()["results"]
    assert set(nodes[0]) == {"id", "url", "display", "node_guid", "node_type", "name", "description", "lid"}
    ports = client.get("/api/fabric/ports/", {"brief": "true", "limit": 3}).json()["results"]
    assert set(ports[0]) == {"id", "url", "display", "node", "port_num", "port_guid", "lid"}
    assert set(ports[0]["node"]) == set(nodes[0])
    fabrics = client.get("/api/fabric/fabrics/", {"brief": 1}).json()["results"]
    assert fabrics == [
        {
            "id": small.pk,
            "url": f"http://testserver/api/fabric/fabrics/{small.pk}/",
            "display": "small",
            "name": "small",
        }
    ]
    full = client.get("/api/fabric/nodes/", {"limit": 1}).json()["results"][0]
    assert set(full["fabric"]) == {"id", "url", "display", "name"}  # nested brief form


# --- filters -----------------------------------------------------------------------------------


def test_filter_by_guid_compares_numbers(small, client_for):
    client = client_for("viewer")
    node = Node.objects.filter(fabric=small, node_type=NodeType.CA).order_by("id").first()
    for form in (
        node.node_guid,
        unpadded_upper(node.node_guid),
        "0x" + unpadded_upper(node.node_guid).lower(),
    ):
        body = client.get("/api/fabric/nodes/", {"guid": form}).json()
        assert [r["node_guid"] for r in body["results"]] == [node.node_guid], form
    other = Node.objects.filter(fabric=small).exclude(pk=node.pk).first()
    body = client.get(
        "/api/fabric/nodes/", {"guid": f"{node.node_guid},{unpadded_upper(other.node_guid)}"}
    ).json()
    assert {r["id"] for r in body["results"]} == {node.pk, other.pk}


def test_bad_guid_is_a_400_naming_it(small, client_for):
    resp = client_for("viewer").get("/api/fabric/nodes/", {"guid": "0xnothex"})
    assert resp.status_code == 400
    assert "0xnothex" in str(resp.json()["guid"])


def test_filter_by_lid_finds_switches_and_ca_ports(small, client_for):
    client = client_for("viewer")
    switch = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH, lid__isnull=False).first()
    body = client.get("/api/fabric/nodes/", {"lid": switch.lid, "fabric": small.pk}).json()
    assert switch.pk in {r["id"] for r in body["results"]}
    ca_port = Port.objects.filter(node__fabric=small, node__node_type=NodeType.CA, lid__isnull=False).first()
    body = client.get("/api/fabric/nodes/", {"lid": ca_port.lid, "fabric": small.pk}).json()
    assert ca_port.node_id in {r["id"] for r in body["results"]}
    ports = client.get("/api/fabric/ports/", {"lid": ca_port.lid, "fabric": small.pk}).json()["results"]
    assert ca_port.pk in {p["id"] for p in ports}
    # a switch port carries the switch's LID
    sw_ports = client.get("/api/fabric/ports/", {"lid": switch.lid, "node": switch.pk, "limit": 1000}).json()
    assert sw_ports["count"] == Port.objects.filter(node=switch).count()


def test_filter_type_tier_description(ndr, client_for):
    client = client_for("viewer")
    for node_type in (NodeType.SWITCH, NodeType.CA):
        body = client.get("/api/fabric/nodes/", {"type": node_type, "limit": 1}).json()
        assert body["count"] == Node.objects.filter(node_type=node_type).count()
    leaves = Node.objects.filter(tier=Tier.LEAF).count()
    assert leaves > 0
    assert client.get("/api/fabric/nodes/", {"tier": "leaf", "limit": 1}).json()["count"] == leaves
    assert (
        client.get("/api/fabric/nodes/", {"tier": str(Tier.LEAF.value), "limit": 1}).json()["count"] == leaves
    )
    assert (
        client.get("/api/fabric/nodes/", {"tier": "leaf,spine", "limit": 1}).json()["count"]
        == Node.objects.filter(tier__in=[Tier.LEAF, Tier.SPINE]).count()
    )
    assert client.get("/api/fabric/nodes/", {"tier": "attic"}).status_code == 400
    word = Node.objects.filter(node_type=NodeType.SWITCH).first().description.split(";")[-1][:6].upper()
    body = client.get("/api/fabric/nodes/", {"description": word, "limit": 1}).json()
    assert body["count"] == Node.objects.filter(description__icontains=word).count() > 0


def test_port_filters_state_speed_width(small, client_for):
    client = client_for("viewer")
    speeds = set(Port.objects.filter(node__fabric=small).exclude(speed="").values_list("speed", flat=True))
    assert len(speeds) >= 2  # the UFM lab file mixes FDR/EDR/HDR
    for speed in speeds:
        body = client.get("/api/fabric/ports/", {"speed": speed.lower(), "limit": 1}).json()
        assert body["count"] == Port.objects.filter(speed=speed).count(), speed
    both = client.get("/api/fabric/ports/", {"speed": ",".join(speeds), "limit": 1}).json()["count"]
    assert both == Port.objects.filter(speed__in=speeds).count()
    width = Port.objects.exclude(width="").values_list("width", flat=True).first()
    assert (
        client.get("/api/fabric/ports/", {"width": width, "limit": 1}).json()["count"]
        == Port.objects.filter(width=width).count()
    )
    active = Port.objects.filter(state=PortState.ACTIVE).count()
    assert client.get("/api/fabric/ports/", {"state": "active", "limit": 1}).json()["count"] == active
    assert client.get("/api/fabric/ports/", {"state": "4", "limit": 1}).json()["count"] == active
    assert client.get("/api/fabric/ports/", {"state": "sleepy"}).status_code == 400
    connected = Port.objects.filter(Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False)).count()
    assert client.get("/api/fabric/ports/", {"connected": "true", "limit": 1}).json()["count"] == connected


def test_link_filters_either_end(small, client_for):
    client = client_for("viewer")
    switch = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH).first()
    expected = Link.objects.filter(Q(port_a__node=switch) | Q(port_b__node=switch)).count()
    assert expected > 0
    body = client.get("/api/fabric/links/", {"guid": unpadded_upper(switch.node_guid), "limit": 1}).json()
    assert body["count"] == expected
    assert client.get("/api/fabric/links/", {"node": switch.pk, "limit": 1}).json()["count"] == expected
    speed = Link.objects.filter(fabric=small).values_list("speed", flat=True).first()
    body = client.get("/api/fabric/links/", {"speed": speed, "limit": 1}).json()
    assert body["count"] == Link.objects.filter(fabric=small, speed=speed).count()
    link = client.get("/api/fabric/links/", {"limit": 1}).json()["results"][0]
    db_link = Link.objects.select_related("port_a__node", "port_b__node").get(pk=link["id"])
    assert link["port_a"]["node"]["node_guid"] == db_link.port_a.node.node_guid
    assert link["port_b"]["port_num"] == db_link.port_b.port_num


def test_node_detail_lists_ports_with_remote_ends(small, client_for):
    client = client_for("viewer")
    switch = Node.objects.filter(fabric=small, node_type=NodeType.SWITCH).first()
    body = client.get(f"/api/fabric/nodes/{switch.pk}/").json()
    assert [p["port_num"] for p in body["ports"]] == list(
        Port.objects.filter(node=switch).order_by("port_num").values_list("port_num", flat=True)
    )
    checked = 0
    for p in body["ports"]:
        link = (
            Link.objects.filter(Q(port_a_id=p["id"]) | Q(port_b_id=p["id"]))
            .select_related("port_a__node", "port_b__node")
            .first()
        )
        if link is None:
            assert p["remote"] is None and p["link"] is None
            continue
        remote = link.port_b if link.port_a_id == p["id"] else link.port_a
        assert p["remote"]["id"] == remote.pk
        assert p["remote"]["node"]["node_guid"] == remote.node.node_guid
        assert p["link"]["id"] == link.pk
        checked += 1
    assert checked > 0


# --- efficiency --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,max_queries",
    [
        ("/api/fabric/nodes/?limit=1000", 4),
        ("/api/fabric/ports/?limit=1000", 4),
        ("/api/fabric/links/?limit=1000", 4),
        ("/api/fabric/fabrics/", 4),
        ("/api/fabric/hosts/?limit=1000", 5),
        ("/api/fabric/discoveries/", 4),
    ],
)
def test_lists_have_no_n_plus_one(ndr, client_for, django_assert_max_num_queries, url, max_queries):
    client = client_for("viewer")
    client.get("/api/fabric/nodes/?limit=1")  # warm the session/user/role queries
    with django_assert_max_num_queries(max_queries + 3):  # + session, user, role groups
        resp = client.get(url)
    assert resp.status_code == 200
    assert len(resp.json()["results"]) > 0


def test_node_detail_has_no_n_plus_one(ndr, client_for, django_assert_max_num_queries):
    client = client_for("viewer")
    switch = Node.objects.filter(node_type=NodeType.SWITCH).order_by("-num_ports").first()
    client.get("/api/fabric/nodes/?limit=1")
    with django_assert_max_num_queries(3 + 3):
        body = client.get(f"/api/fabric/nodes/{switch.pk}/").json()
    assert len(body["ports"]) == Port.objects.filter(node=switch).count() > 10


# --- permissions and audit ---------------------------------------------------------------------


def test_viewer_and_operator_cannot_write(small, client_for):
    viewer, operator = client_for("viewer"), client_for("operator")
    assert viewer.post("/api/fabric/fabrics/", {"name": "x"}).status_code == 403
    assert operator.post("/api/fabric/fabrics/", {"name": "x"}).status_code == 403
    assert viewer.patch(f"/api/fabric/fabrics/{small.pk}/", {"description": "y"}).status_code == 403
    assert viewer.post(f"/api/fabric/fabrics/{small.pk}/discover/").status_code == 403
    assert viewer.post("/api/fabric/fabrics/import/", {"fabric": "x", "text": "junk"}).status_code == 403
    assert operator.post(f"/api/fabric/fabrics/{small.pk}/import/", {"text": "junk"}).status_code == 403
    assert viewer.delete(f"/api/fabric/fabrics/{small.pk}/").status_code == 403
    # topology is read-only for everyone: it comes from discovery
    node = Node.objects.filter(fabric=small).first()
    assert client_for("admin").delete(f"/api/fabric/nodes/{node.pk}/").status_code == 405
    assert not Fabric.objects.filter(name="x").exists()
    assert Fabric.objects.get(pk=small.pk).description == small.description


def test_admin_fabric_changes_are_audited(db, client_for):
    admin = client_for("admin")
    resp = admin.post(
        "/api/fabric/fabrics/",
        {"name": "lab-b", "description": "second lab", "subnet_prefix": "fe80::"},
        format="json",
    )
    assert resp.status_code == 400 and "subnet_prefix" in resp.json()
    resp = admin.post(
        "/api/fabric/fabrics/", {"name": "lab-b", "subnet_prefix": "FE80000000000000"}, format="json"
    )
    assert resp.status_code == 201, resp.content
    fabric = Fabric.objects.get(name="lab-b")
    assert fabric.subnet_prefix == "0xfe80000000000000"
    resp = admin.patch(f"/api/fabric/fabrics/{fabric.pk}/", {"description": "renamed"}, format="json")
    assert resp.status_code == 200
    entries = list(
        AuditEntry.objects.filter(object_id=str(fabric.pk), action__startswith="fabric.")
        .order_by("id")
        .values_list("action", "username", "changes")
    )
    assert [e[:2] for e in entries] == [("fabric.create", "ada"), ("fabric.update", "ada")]
    assert entries[1][2] == {"description": ["", "renamed"]}
    assert admin.delete(f"/api/fabric/fabrics/{fabric.pk}/").status_code == 204
    assert not Fabric.objects.filter(pk=fabric.pk).exists()
    assert AuditEntry.objects.filter(action="fabric.delete", object_id=str(fabric.pk)).exists()


def test_operator_queues_discovery_audited(
    small, client_for, monkeypatch, django_capture_on_commit_callbacks
):
    from fabric import tasks

    queued = []

    # The in-process worker does not run in unit tests; record what would be queued.
    monkeypatch.setattr(
        tasks.discover_fabric_task,
        "apply_async",
        lambda args, task_id: queued.append(args[0]),
    )
    # an imported fabric has no live access: discovering "it" from this host would find another one
    with django_capture_on_commit_callbacks(execute=True):
        resp = client_for("operator").post(f"/api/fabric/fabrics/{small.pk}/discover/")
    assert resp.status_code == 409 and "no live access" in resp.json()["detail"]
    assert queued == [] and not AuditEntry.objects.filter(action="fabric.discover").exists()
    Fabric.objects.filter(pk=small.pk).update(ca_name="mlx5_0", ca_port=1)
    with django_capture_on_commit_callbacks(execute=True):
        resp = client_for("operator").post(f"/api/fabric/fabrics/{small.pk}/discover/")
    assert resp.status_code == 202
    assert resp.json()["queued"] is True and resp.json()["fabric"]["name"] == "small"
    assert queued == [small.pk]
    entry = AuditEntry.objects.get(action="fabric.discover")
    assert entry.username == "olga" and entry.object_id == str(small.pk)


def test_a_new_live_fabric_is_discovered_at_once(
    db, client_for, monkeypatch, django_capture_on_commit_callbacks
):
    """Creating a fabric with live access queues its first discovery (audited ``fabric.discover``)
    when the create commits, instead of waiting for the periodic one; one without (to be imported
    into) queues nothing."""
    from fabric import tasks

    queued = []
    monkeypatch.setattr(tasks.discover_fabric_task, "apply_async", lambda args, task_id: queued.append(args))
    admin = client_for("admin")
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin.post("/api/fabric/fabrics/", {"name": "files"}, format="json")
    assert resp.status_code == 201 and queued == []
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin.post(
            "/api/fabric/fabrics/", {"name": "hall-b", "ca_name": "mlx5_0", "ca_port": 1}, format="json"
        )
    assert resp.status_code == 201, resp.content
    new = resp.json()["id"]
    assert queued == [(new,)]
    actions = list(
        AuditEntry.objects.filter(object_id=str(new)).order_by("id").values_list("action", flat=True)
    )
    assert actions == ["fabric.create", "fabric.discover"]


class AuditWriteFailed(RuntimeError):
    """What the patched ``accounts.audit.record`` raises."""


def _fabric_state(fabric_id: int) -> dict:
    return {
        "fabrics": sorted(Fabric.objects.values_list("id", "name", "description", "tool_env")),
        "nodes": Node.objects.filter(fabric_id=fabric_id).count(),
        "audit": list(AuditEntry.objects.exclude(action="user.login").values_list("id", flat=True)),
    }


@pytest.mark.parametrize(
    "role,method,path,body,ok",
    [
        ("admin", "post", "/api/fabric/fabrics/", {"name": "new-fabric"}, 201),
        ("admin", "patch", "/api/fabric/fabrics/{pk}/", {"description": "changed"}, 200),
        ("admin", "put", "/api/fabric/fabrics/{pk}/", {"name": "renamed", "description": "changed"}, 200),
        ("admin", "delete", "/api/fabric/fabrics/{pk}/", None, 204),
        ("operator", "post", "/api/fabric/fabrics/{pk}/discover/", None, 202),
    ],
    ids=["create", "partial-update", "update", "delete", "discover"],
)
def test_a_failed_audit_write_stores_no_change_and_queues_nothing(
    small, client_for, monkeypatch, django_capture_on_commit_callbacks, role, method, path, body, ok
):
    """A change and its audit entry commit together or not at all (NetBox wraps perform_* in
    ``transaction.atomic``): when the entry cannot be written the request fails, nothing is stored
    and no discovery is queued."""
    from accounts import audit
    from fabric import tasks

    Fabric.objects.filter(pk=small.pk).update(tool_env={"LD_PRELOAD": "libumad2sim.so"})  # discoverable
    client = client_for(role)  # signed in before the audit breaks (a login is audited too)
    before = _fabric_state(small.pk)
    queued = []
    monkeypatch.setattr(tasks.discover_fabric_task, "apply_async", lambda args, task_id: queued.append(args))

    def fail(*args, **kwargs):
        raise AuditWriteFailed("the audit table is unavailable")

    monkeypatch.setattr(audit, "record", fail)
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(AuditWriteFailed):
        getattr(client, method)(path.format(pk=small.pk), body, format="json")
    assert callbacks == [] and queued == []
    assert _fabric_state(small.pk) == before
    # the same request with a working audit log does change something (the test can fail)
    monkeypatch.undo()
    monkeypatch.setattr(tasks.discover_fabric_task, "apply_async", lambda args, task_id: queued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        resp = getattr(client, method)(path.format(pk=small.pk), body, format="json")
    assert resp.status_code == ok, resp.content
    after = _fabric_state(small.pk)
    assert len(after["audit"]) == len(before["audit"]) + 1
    if path.endswith("/discover/"):
        assert queued == [(small.pk,)] and after["fabrics"] == before["fabrics"]
    else:
        assert queued == [] and after["fabrics"] != before["fabrics"]


# --- import ------------------------------------------------------------------------------------


def _counts(fabric: Fabric) -> dict:
    return {
        "switches": Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).count(),
        "cas": Node.objects.filter(fabric=fabric, node_type=NodeType.CA).count(),
        "links": Link.objects.filter(fabric=fabric).count(),
    }


def test_import_multipart_creates_a_second_fabric(small, realdata, client_for):
    admin = client_for("admin")
    with open(realdata / NDR, "rb") as fh:
        resp = admin.post("/api/fabric/fabrics/import/", {"fabric": "second", "file": fh}, format="multipart")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    fabric = Fabric.objects.get(name="second")
    counts = _counts(fabric)
    assert {k: body["summary"][k] for k in counts} == counts
    assert counts["switches"] > 0 and counts["cas"] > 0
    assert body["discovery"]["source"] == DiscoverySource.UPLOAD
    assert body["discovery"]["filename"].endswith("nvidia_topograph_ndr_dgx.ibnetdiscover.out")
    assert body["summary"]["added"] > 0
    assert "diff" not in body["discovery"]  # thousands of keys: on the discovery's own URL
    detail = admin.get(f"/api/fabric/discoveries/{body['discovery']['id']}/").json()
    assert len(detail["diff"]["added"]["nodes"]) == counts["switches"] + counts["cas"]  # under the cap
    listed = admin.get("/api/fabric/discoveries/", {"fabric": fabric.pk}).json()["results"]
    assert "diff" not in listed[0]
    assert (
        admin.get("/api/fabric/discoveries/", {"fabric": fabric.pk, "diff": 1}).json()["results"][0]["diff"]
        == detail["diff"]
    )
    assert Fabric.objects.count() == 2
    entry = AuditEntry.objects.get(action="fabric.import")
    assert entry.username == "ada" and entry.object_id == str(fabric.pk)
    # the same file again into the same fabric, by its id: nothing changes, nothing is written
    with open(realdata / NDR, "rb") as fh:
        again = admin.post(
            f"/api/fabric/fabrics/{fabric.pk}/import/", {"file": fh}, format="multipart"
        ).json()
    assert (again["summary"]["added"], again["summary"]["removed"], again["summary"]["changed"]) == (0, 0, 0)
    assert again["summary"]["rows_written"] == 0


def test_import_gzip_and_raw_text_equal_plain(realdata, client_for):
    admin = client_for("admin")
    raw = (realdata / SMALL).read_bytes()
    plain = admin.post(
        "/api/fabric/fabrics/import/", {"fabric": "plain", "text": raw.decode()}, format="json"
    )
    assert plain.status_code == 201, plain.content
    gz = admin.generic(
        "POST",
        "/api/fabric/fabrics/import/?fabric=zipped&filename=small.txt.gz",
        gzip.compress(raw),
        content_type="application/gzip",
    )
    assert gz.status_code == 201, gz.content
    text = admin.generic("POST", "/api/fabric/fabrics/import/?fabric=texty", raw, content_type="text/plain")
    assert text.status_code == 201, text.content
    expected = _counts(Fabric.objects.get(name="plain"))
    assert _counts(Fabric.objects.get(name="zipped")) == expected == _counts(Fabric.objects.get(name="texty"))
    assert gz.json()["discovery"]["filename"] == "small.txt"


@pytest.mark.parametrize(
    "payload",
    [
        b"this is not\na topology file\n",
        bytes(range(256)) * 8,
    ],
    ids=["prose", "binary"],
)
def test_import_bad_file_is_400_with_line_and_stores_nothing(small, client_for, payload, tmp_path):
    admin = client_for("admin")
    bad = tmp_path / "junk.txt"
    bad.write_bytes(payload)
    before = (Node.objects.count(), Link.objects.count(), Discovery.objects.count())
    with open(bad, "rb") as fh:
        resp = admin.post("/api/fabric/fabrics/import/", {"fabric": "junk", "file": fh}, format="multipart")
    assert resp.status_code == 400
    body = resp.json()
    assert isinstance(body["line"], int) and body["line"] >= 1
    assert "junk.txt" in body["error"] and f":{body['line']}:" in body["error"]
    assert not Fabric.objects.filter(name="junk").exists()
    assert (Node.objects.count(), Link.objects.count(), Discovery.objects.count()) == before


def test_import_corrupt_gzip_and_missing_input(client_for):
    admin = client_for("admin")
    resp = admin.generic(
        "POST",
        "/api/fabric/fabrics/import/?fabric=z",
        b"\x1f\x8b\x08\x00garbage",
        content_type="application/gzip",
    )
    assert resp.status_code == 400 and "gzip" in str(resp.json())
    assert admin.post("/api/fabric/fabrics/import/", {"fabric": "z"}, format="multipart").status_code == 400
    assert (
        admin.post(
            "/api/fabric/fabrics/import/", {"fabric": "not a slug!", "text": "x"}, format="json"
        ).status_code
        == 400
    )
    assert not Fabric.objects.exists()


def test_import_warnings_carry_line_numbers(realdata, client_for):
    admin = client_for("admin")
    with open(realdata / BAD_LIDS, "rb") as fh:
        resp = admin.post(
            "/api/fabric/fabrics/import/", {"fabric": "badlids", "file": fh}, format="multipart"
        )
    assert resp.status_code == 201, resp.content
    warnings = resp.json()["discovery"]["warnings"]
    assert warnings and all(isinstance(w["line"], int) and w["line"] >= 1 for w in warnings)
    lines = (realdata / BAD_LIDS).read_text().splitlines()
    # each warning points at a line that mentions a LID (the file's defects are its LIDs)
    assert all("lid" in lines[w["line"] - 1] for w in warnings)


# --- map layout --------------------------------------------------------------------------------


def test_map_payload_matches_the_model(ndr, client_for):
    body = client_for("viewer").get(f"/api/fabric/fabrics/{ndr.pk}/map/").json()
    nodes = body["nodes"]
    n = Node.objects.filter(fabric=ndr).count()
    assert len(nodes["id"]) == len(nodes["x"]) == len(nodes["y"]) == len(nodes["guid"]) == n
    assert body["counts"]["links"] == Link.objects.filter(fabric=ndr).count()
    assert sum(body["edges"]["n"]) + body["counts"]["self_loops"] == body["counts"]["links"]
    pairs = set(zip(body["edges"]["a"], body["edges"]["b"], strict=True))
    assert len(pairs) == len(body["edges"]["a"])  # one edge per node pair
    # rows: every host below every leaf, every leaf below every spine (y grows upwards)
    tiers = dict(Node.objects.filter(fabric=ndr).values_list("id", "tier"))
    y_by_tier: dict[int, list[float]] = {}
    for node_id, y, host in zip(nodes["id"], nodes["y"], nodes["host"], strict=True):
        if tiers[node_id] != Tier.HOST or host >= 0:
            y_by_tier.setdefault(tiers[node_id], []).append(y)
    assert max(y_by_tier[Tier.HOST]) < min(y_by_tier[Tier.LEAF])
    assert max(y_by_tier[Tier.LEAF]) < min(y_by_tier[Tier.SPINE])
    # a CA without host linked only to a switch above the leaves hangs just below that switch
    index = {node_id: k for k, node_id in enumerate(nodes["id"])}
    hanging = 0
    for link in Link.objects.filter(fabric=ndr).select_related("port_a__node", "port_b__node"):
        for ca, sw in ((link.port_a.node, link.port_b.node), (link.port_b.node, link.port_a.node)):
            if ca.node_type == NodeType.CA and ca.host_id is None and sw.tier in (Tier.SPINE, Tier.CORE):
                assert nodes["y"][index[ca.pk]] < nodes["y"][index[sw.pk]]
                assert nodes["x"][index[ca.pk]] == nodes["x"][index[sw.pk]]
                hanging += 1
    assert hanging > 0  # the NDR DGX file has CAs on spines (UFM/SHARP hosts)
    # the CAs of one host share a column
    host_x: dict[int, set] = {}
    for h, x in zip(nodes["host"], nodes["x"], strict=True):
        if h >= 0:
            host_x.setdefault(h, set()).add(x)
    assert host_x and all(len(xs) == 1 for xs in host_x.values())
    # a GUID given to the browser is the stored canonical one
    node = Node.objects.filter(fabric=ndr).first()
    assert nodes["guid"][nodes["id"].index(node.pk)] == node.node_guid


def test_map_edges_keep_the_slowest_link(small, client_for):
    body = client_for("viewer").get(f"/api/fabric/fabrics/{small.pk}/map/").json()
    index = {node_id: k for k, node_id in enumerate(body["nodes"]["id"])}
    for link in Link.objects.filter(fabric=small).select_related("port_a", "port_b"):
        a, b = index[link.port_a.node_id], index[link.port_b.node_id]
        if a == b:
            continue
        a, b = min(a, b), max(a, b)
        e = next(
            k
            for k in range(len(body["edges"]["a"]))
            if {body["edges"]["a"][k], body["edges"]["b"][k]} == {a, b}
        )
        assert body["edges"]["rate"][e] <= (link.rate_gbps or 0) + 1e-9
        assert body["speeds"][body["edges"]["speed"][e]] in {
            s for s in Link.objects.filter(fabric=small).values_list("speed", flat=True)
        }


def test_map_edges_part_is_the_light_payload_of_an_open_map(small, client_for):
    viewer = client_for("viewer")
    full = viewer.get(f"/api/fabric/fabrics/{small.pk}/map/").json()
    part = viewer.get(f"/api/fabric/fabrics/{small.pk}/map/", {"part": "edges"}).json()
    from fabric.api.maplayout import LAYERS

    # the IB cables and the registered layers (the devices app's Ethernet links), not the nodes
    assert set(part) == {
        "fabric",
        "discovery",
        "counts",
        "nodes_version",
        "edges",
        "speeds",
        "widths",
        "live",
        *LAYERS,
    }
    assert part["nodes_version"] == full["nodes_version"] and len(part["nodes_version"]) == 16
    assert (part["edges"], part["counts"], part["speeds"]) == (full["edges"], full["counts"], full["speeds"])
    resp = viewer.get(f"/api/fabric/fabrics/{small.pk}/map/", {"part": "nodes"})
    assert resp.status_code == 400 and "part" in resp.json()


# --- OpenAPI -----------------------------------------------------------------------------------


def test_openapi_schema_of_fabric_endpoints_has_no_warnings(db, capsys):
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    GENERATOR_STATS.reset()
    capsys.readouterr()
    generator = SchemaGenerator(patterns=[path("api/fabric/", include("fabric.api.urls"))])
    schema = generator.get_schema(request=None, public=True)
    # GENERATOR_STATS is truthy once a warning or an error was emitted; each is printed to stderr
    emitted = capsys.readouterr().err
    assert not GENERATOR_STATS, emitted
    assert "Warning" not in emitted and "Error" not in emitted
    for p in (
        "/api/fabric/fabrics/",
        "/api/fabric/fabrics/{id}/discover/",
        "/api/fabric/fabrics/{id}/import/",
        "/api/fabric/fabrics/import/",
        "/api/fabric/fabrics/{id}/map/",
        "/api/fabric/nodes/",
        "/api/fabric/ports/",
        "/api/fabric/links/",
        "/api/fabric/discoveries/",
        "/api/fabric/hosts/",
        "/api/fabric/subnet-managers/",
    ):
        assert p in schema["paths"], p
    params = {q["name"] for q in schema["paths"]["/api/fabric/nodes/"]["get"]["parameters"]}
    assert {"guid", "lid", "description", "type", "tier", "brief", "limit", "offset"} <= params


# --- hosts and subnet managers -----------------------------------------------------------------


def test_hosts_group_cas_by_host_name(ndr, client_for):
    from fabric.models import Host

    client = client_for("viewer")
    body = client.get("/api/fabric/hosts/", {"fabric": ndr.pk, "limit": 1000}).json()
    assert body["count"] == Host.objects.filter(fabric=ndr).count() > 0
    for host in body["results"]:
        assert host["nodes"], host["name"]
        for node in host["nodes"]:
            assert node["description"].split()[0] == host["name"]
    name = body["results"][0]["name"]
    nodes = client.get("/api/fabric/nodes/", {"host_name": name, "limit": 100}).json()
    assert {n["id"] for n in nodes["results"]} == {n["id"] for n in body["results"][0]["nodes"]}


def test_subnet_managers_filters(small, client_for):
    from fabric.choices import SMState
    from fabric.models import SubnetManager

    master = SubnetManager.objects.create(
        fabric=small, guid="0x0002c90300a1b2c3", lid=1, priority=15, state=SMState.MASTER
    )
    SubnetManager.objects.create(
        fabric=small, guid="0x0002c90300a1b2c4", lid=2, priority=0, state=SMState.STANDBY
    )
    client = client_for("viewer")
    body = client.get("/api/fabric/subnet-managers/", {"guid": "2C90300A1B2C3"}).json()
    assert [r["id"] for r in body["results"]] == [master.pk]
    body = client.get("/api/fabric/subnet-managers/", {"state": "master"}).json()
    assert [(r["guid"], r["state"]["label"]) for r in body["results"]] == [(master.guid, "Master")]
    assert client.get("/api/fabric/subnet-managers/", {"fabric": small.pk}).json()["count"] == 2


@pytest.mark.backend
def test_notice_listener_times_are_iso_8601(small, client_for):
    """The listener caches epoch seconds (``ListenerStatus``); the fabric's ``notices`` gives its
    times in ISO 8601 as the API's other times, and the schema says so."""
    from datetime import UTC, datetime

    from django.core.cache import cache

    from fabric.services.notice_status import status_key
    from fabric.services.notices import ListenerStatus

    client = client_for("viewer")
    assert client.get(f"/api/fabric/fabrics/{small.pk}/").json()["notices"] is None  # no listener
    subscribed = datetime(2026, 12, 2, 13, 6, 58, 250000, tzinfo=UTC)
    status = ListenerStatus("small", state="subscribed", sm_lid=1, subscribed_at=subscribed.timestamp())
    cache.set(status_key(small.pk), status.as_dict(), 60)
    try:
        notices = client.get(f"/api/fabric/fabrics/{small.pk}/").json()["notices"]
    finally:
        cache.delete(status_key(small.pk))
    assert notices["subscribed_at"] == "2026-12-02T13:06:58.250000Z"
    assert datetime.fromisoformat(notices["subscribed_at"]) == subscribed
    assert notices["last_notice_at"] is None and notices["state"] == "subscribed"
    # the same format as a stored time of the same object (a discovery's, DRF's DateTimeField)
    started = client.get(f"/api/fabric/discoveries/?fabric={small.pk}").json()["results"][0]["started"]
    assert started.endswith("Z") and "T" in started
    schema = client_for("admin").get("/api/schema/", {"format": "json"}).json()
    props = schema["components"]["schemas"]["Fabric"]["properties"]["notices"]["properties"]
    assert props["subscribed_at"] == {"type": "string", "format": "date-time", "nullable": True}
    assert props["last_notice_at"]["format"] == "date-time"
