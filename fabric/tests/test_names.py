"""Node-name maps (issue 10): the parser, names on import, live discovery, map changes, the API and
pages, hosts from mapped names, and raw NodeDescriptions kept as the tool printed them."""

from __future__ import annotations

import re

import pytest

from accounts.models import AuditEntry
from events.models import Event
from fabric.models import Fabric, Host, Node
from fabric.parsers.node_name_map import NodeNameMapError, parse_node_name_map
from fabric.services.derive import host_for
from fabric.services.discovery import discover
from fabric.services.ingest import import_topology_text
from fabric.services.requests import set_node_name_map

SCINET = "opensm/scinet10_ib-node-name-map"
PSMN = "ibnetdiscover/psmn_X5.ibnetdiscover.topo"
PSMN_MAP = "ibnetdiscover/psmn_X5.guidmap"
GENERIC = "MT25408 ConnectX Mellanox Technologies"


def _psmn_map(realdata) -> tuple[str, dict[str, str]]:
    """The PSMN cluster's real GUID → host name list (``H-<node GUID> <host>``, the format of its
    ibmap2slurm tool) written as an OpenSM/ibnetdiscover node-name map."""
    names = {}
    for line in (realdata / PSMN_MAP).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            token, host = line.split()
            names[f"0x{token[2:].lower()}"] = host
    text = "# PSMN X5 hosts\n" + "".join(f'{g} "{n}"\n' for g, n in names.items())
    return text, names


# -- parser -------------------------------------------------------------------------------------


def test_real_scinet_map_is_refused_whole_with_every_redacted_guid_located(realdata):
    text = (realdata / SCINET).read_text()
    with pytest.raises(NodeNameMapError) as info:
        parse_node_name_map(text, "scinet10_ib-node-name-map")
    err = info.value
    # the published file has its GUIDs redacted as "<guid>": 11 entries, lines 3-13
    assert [e.line for e in err.errors] == list(range(3, 14))
    assert err.total == 11
    assert all("'<guid>' is not a node GUID" in e.message for e in err.errors)
    assert err.errors[1].text == '<guid>  "Mellanox-3230-qdr"'
    assert str(err).splitlines()[0].startswith("scinet10_ib-node-name-map:3: '<guid>' is not a node GUID")


def test_real_scinet_map_with_guids_filled_in(realdata):
    lines = (realdata / SCINET).read_text().splitlines(keepends=True)
    filled, n = [], 0
    for line in lines:
        if line.startswith("<guid>"):
            n += 1
            line = line.replace("<guid>", f"0x0002c9030000{n:04x}", 1)
        filled.append(line)
    parsed = parse_node_name_map("".join(filled), "scinet")
    assert len(parsed) == 11
    assert parsed.names["0x0002c90300000001"] == "Mellanox-NOC-qdr"
    assert parsed.names["0x0002c90300000003"] == "Mellanox-3230-2-qdr"
    assert parsed.lines["0x0002c9030000000b"] == 13


def test_parser_forms_the_tools_accept():
    text = (
        "\ufeff# IB1\n"
        "  # Line cards\n"
        '0x0008f104003f125c "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D"\r\n'
        '0x8F104003F125D\t"short"   # trailing comment\n'
        "0x0008f104003f10d2 switch-7 # unquoted, as the tools read it\n"
        '0x0008f104003f125c "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D"\n'  # same again: fine
        "\n"
    )
    parsed = parse_node_name_map(text)
    assert parsed.names == {
        "0x0008f104003f125c": "IB1 (Rack 11 slot 1   ) ISR9288/ISR9096 Voltaire sLB-24D",
        "0x0008f104003f125d": "short",
        "0x0008f104003f10d2": "switch-7",
    }
    assert parse_node_name_map("").names == {}


def test_parser_locates_every_bad_line():
    text = (
        '0x01 "ok"\n'
        '0x02 "unterminated\n'
        '0x03 "name" junk\n'
        "0x04\n"
        '0x05 ""\n'
        '0x01 "other"\n'
        '0x00000000000000001 "17 digits"\n'
        'b8cef60300xxxxxx "hand edited"\n'
        '12345 "decimal"\n'
        '0x06 "tab\tinside"\n'
        f'0x07 "{"n" * 129}"\n'
    )
    with pytest.raises(NodeNameMapError) as info:
        parse_node_name_map(text, "site.map")
    got = [(e.line, e.message) for e in info.value.errors]
    assert [line for line, _ in got] == list(range(2, 12))
    msgs = dict(got)
    assert msgs[2] == "the name's closing quote is missing"
    assert msgs[3] == "text after the quoted name: 'junk' (start a comment with #)"
    assert msgs[4] == "GUID 0x0000000000000004 has no name"
    assert msgs[5] == "GUID 0x0000000000000005 has no name"
    assert msgs[6] == "GUID 0x0000000000000001 already named 'ok' on line 1"
    assert "'0x00000000000000001' is not a node GUID" in msgs[7]
    assert "'b8cef60300xxxxxx' is not a node GUID" in msgs[8]
    assert "'12345' is not a node GUID" in msgs[9]
    assert msgs[10] == "the name holds control characters"
    assert msgs[11] == "the name is 129 characters long (at most 128)"
    assert info.value.as_dicts()[0] == {
        "source": "site.map", "line": 2, "message": "the name's closing quote is missing",
        "text": '0x02 "unterminated',
    }  # fmt: skip


def test_host_rule():
    # the description's host wins; a mapped name gives one only when the description has none
    assert host_for("ca", "host017 mlx5_3", "cn17-hca") == "host017"
    assert host_for("ca", GENERIC, "x5570comp1") == "x5570comp1"
    assert host_for("ca", GENERIC, "cn017 mlx5_0") == "cn017"
    assert host_for("ca", GENERIC, "rack 3 node 17") is None
    assert host_for("ca", GENERIC, GENERIC) is None  # no map entry: the trimmed description
    assert host_for("switch", "MF0;sw01:MQM8700/U1", "leaf01") is None
    assert host_for("ca", "Mellanox Technologies Aggregation Node", "leaf01-an") is None


# -- import -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_import_with_real_map_names_nodes_and_derives_hosts(realdata):
    """PSMN X5: 89 HCAs all described "MT25408 ConnectX Mellanox Technologies" (no host), and the
    site's own GUID → host list for 86 of them."""
    map_text, names = _psmn_map(realdata)
    fabric = Fabric.objects.create(name="x5")
    set_node_name_map(fabric, text=map_text, filename="X5.map")
    text = (realdata / PSMN).read_text()
    d = import_topology_text("x5", text, filename="X5.topofile")
    assert d.counts["cas"] == 89
    cas = Node.objects.filter(fabric=fabric, node_type="ca")
    mapped = cas.filter(node_guid__in=names)
    assert mapped.count() == 86
    node = Node.objects.get(fabric=fabric, node_guid="0x003048c74e4a0000")
    assert (node.name, node.description, str(node)) == ("x5570comp1", GENERIC, "x5570comp1")
    assert node.host.name == "x5570comp1"
    assert Host.objects.filter(fabric=fabric).count() == 86
    assert sorted(Host.objects.filter(fabric=fabric).values_list("name", flat=True)) == sorted(names.values())
    # the 3 CAs not in the map keep their description as name and have no host
    rest = cas.exclude(node_guid__in=names)
    assert [(n.name, n.host_id) for n in rest] == [(GENERIC, None)] * 3
    # a switch whose description holds a '#'
    assert Node.objects.filter(fabric=fabric, name="Voltaire 4036 # hoibp0013").exists()
    # importing the same file again writes nothing (ingest and the map service agree on names)
    again = import_topology_text("x5", text, filename="X5.topofile")
    assert again.rows_written == 0


@pytest.mark.django_db
def test_raw_description_kept_with_its_spaces_display_trims(realdata, client_for):
    text = (realdata / "ibnetdiscover/selene_storage.ibnetdiscover.txt").read_text()
    import_topology_text("selene", text, filename="selene_storage")
    node = Node.objects.get(fabric__name="selene", description="selene-cache-04 mlx5_2 ")
    assert node.name == "selene-cache-04 mlx5_2"
    assert node.host.name == "selene-cache-04"
    data = client_for("viewer").get(f"/api/fabric/nodes/{node.pk}/").json()
    assert (data["description"], data["name"], data["display"]) == (
        "selene-cache-04 mlx5_2 ",
        "selene-cache-04 mlx5_2",
        "selene-cache-04 mlx5_2",
    )
    page = client_for("viewer").get(f"/fabric/nodes/{node.pk}/").content.decode()
    assert (
        '<code id="node-description" class="raw-desc" title="NodeDescription as the tool printed it">"selene-cache-04 mlx5_2 "</code>'
        in page
    )


@pytest.mark.django_db
def test_only_spaces_changed_in_a_description_is_stored_without_an_event():
    text = 'Switch 4 "S-0000000000000001" # "sw1" lid 1 lmc 0\n[1] "H-0000000000000002"[1] # "h1 mlx5_0" lid 2 4xHDR\n\nCa 1 "H-0000000000000002" # "h1 mlx5_0"\n[1] "S-0000000000000001"[1] # lid 2 lmc 0 "sw1" lid 1 4xHDR\n'
    import_topology_text("sp", text, filename="a")
    d = import_topology_text("sp", text.replace('# "sw1" lid 1 lmc 0', '# "sw1  " lid 1 lmc 0'), filename="b")
    node = Node.objects.get(fabric__name="sp", node_guid="0x0000000000000001")
    assert (node.description, node.name) == ("sw1  ", "sw1")
    assert d.changed == 1
    assert not Event.objects.filter(code="node.description_changed").exists()


# -- map changes, API, pages --------------------------------------------------------------------


@pytest.mark.django_db
def test_map_change_renames_existing_nodes_with_audit_and_names_reach_events(realdata, client_for, users):
    text = (realdata / PSMN).read_text()
    import_topology_text("x5", text, filename="X5.topofile")
    fabric = Fabric.objects.get(name="x5")
    guid = "0x003048c7488b0000"
    assert Node.objects.get(fabric=fabric, node_guid=guid).name == GENERIC
    assert Host.objects.filter(fabric=fabric).count() == 0
    map_text, _ = _psmn_map(realdata)

    api = client_for("admin")
    r = api.put(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/", {"text": map_text, "filename": "X5.map"},
                format="json")  # fmt: skip
    assert r.status_code == 200, r.content
    assert r.json() | {"text": ""} == {"source": "upload", "text": "", "path": "", "entries": 86, "renamed": 86,
                                       "rehosted": 86, "hosts_created": 86}  # fmt: skip
    node = Node.objects.get(fabric=fabric, node_guid=guid)
    assert (node.name, node.host.name, node.description) == ("x5570comp2", "x5570comp2", GENERIC)
    entry = AuditEntry.objects.get(action="fabric.node_name_map")
    assert entry.user == users["admin"] and entry.object_id == str(fabric.pk)
    assert entry.changes["renamed"] == 86 and entry.changes["filename"] == "X5.map"
    assert entry.changes["before"] == {"source": "none", "path": ""} and entry.changes["source"] == "upload"

    # names everywhere: API display and search, map, heatmap rows, events of the next import
    assert api.get("/api/fabric/nodes/?q=x5570comp2").json()["results"][0]["node_guid"] == guid
    m = api.get(f"/api/fabric/fabrics/{fabric.pk}/map/").json()
    assert m["nodes"]["name"][m["nodes"]["guid"].index(guid)] == "x5570comp2"
    from events.models import Alarm
    from events.notify import describe_object
    from telemetry.api.heatmap import heatmap_snapshot

    switch = Node.objects.get(fabric=fabric, node_guid="0x0008f10500108bba")
    set_node_name_map(fabric, text=map_text + f'{switch.node_guid} "leaf-8bba"\n')
    rows = {r["guid"]: r for r in heatmap_snapshot(fabric)["rows"]}
    assert (rows[switch.node_guid]["name"], rows[switch.node_guid]["description"]) == (
        "leaf-8bba",
        "Voltaire 4036 # 4036-8BBA",
    )
    # a mail about a link alarm names both ends by their names
    alarm = Alarm(fabric=fabric, code="link.down", object_type="link", object_repr="",
                  object_key=f"{switch.node_guid}/29-{guid}/1")  # fmt: skip
    assert describe_object(alarm) == "leaf-8bba [29] <-> x5570comp2 [1]"
    set_node_name_map(fabric, text=map_text)
    gone = re.sub(r'(?ms)^Ca\s+\d+\s+"H-003048c7488b0000".*?\n\n', "", text)
    gone = "\n".join(ln for ln in gone.splitlines() if '"H-003048c7488b0000"' not in ln) + "\n"
    import_topology_text("x5", gone, filename="X5-less.topofile", replace=True)
    ev = Event.objects.get(fabric=fabric, code="node.removed")
    assert ev.message.startswith("x5570comp2 (0x003048c7488b0000)") and ev.object_repr == "x5570comp2"
    # (the link's other end is named from the new topology; the removed end by its stored name)
    link = Event.objects.get(fabric=fabric, code="link.down")
    assert link.object_repr == "Voltaire 4036 # 4036-8BBA [29] <-> x5570comp2 [1]"

    # removing the map: descriptions again, hosts of mapped names left without nodes
    r = api.delete(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/")
    assert r.status_code == 200 and r.json()["renamed"] == 85
    assert set(Node.objects.filter(fabric=fabric, node_type="ca").values_list("name", flat=True)) == {GENERIC}
    assert AuditEntry.objects.filter(action="fabric.node_name_map").count() == 4


@pytest.mark.django_db
def test_bad_map_upload_is_400_with_located_errors_and_changes_nothing(client_for, realdata):
    text = (realdata / PSMN).read_text()
    import_topology_text("x5", text, filename="X5.topofile")
    fabric = Fabric.objects.get(name="x5")
    set_node_name_map(fabric, text='0x003048c74e4a0000 "first"\n')
    before = list(Node.objects.filter(fabric=fabric).order_by("pk").values_list("name", "host_id"))
    api = client_for("admin")
    viewer, operator = client_for("viewer"), client_for("operator")
    audits = AuditEntry.objects.filter(action="fabric.node_name_map").count()
    bad = '0x003048c74e4a0000 "renamed"\nH-003048c7488b0000 x5570comp2\n0x003048c74e4a0001 "open\n'
    r = api.put(
        f"/api/fabric/fabrics/{fabric.pk}/node-name-map/?filename=X5.map", bad, content_type="text/plain"
    )
    assert r.status_code == 400
    assert [(e["source"], e["line"]) for e in r.json()["errors"]] == [("X5.map", 2), ("X5.map", 3)]
    assert (
        r.json()["errors"][0]["message"]
        == "'H-003048c7488b0000' is not a node GUID (0x and 1 to 16 hex digits)"
    )
    fabric.refresh_from_db()
    assert fabric.node_name_map == '0x003048c74e4a0000 "first"\n'
    assert list(Node.objects.filter(fabric=fabric).order_by("pk").values_list("name", "host_id")) == before
    assert AuditEntry.objects.filter(action="fabric.node_name_map").count() == audits
    # a path outside WEFT_NODE_NAME_MAP_DIRS, both at once, and the roles
    r = api.put(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/", {"path": "/etc/passwd"}, format="json")
    assert r.status_code == 400 and "not in a node-name map directory" in r.json()["error"]
    r = api.put(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/", {"path": "/etc/opensm/x", "text": "0x1 a"},
                format="json")  # fmt: skip
    assert r.status_code == 400 and "not both" in r.json()["error"]
    assert operator.put(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/", {"text": ""},
                        format="json").status_code == 403  # fmt: skip
    got = viewer.get(f"/api/fabric/fabrics/{fabric.pk}/node-name-map/").json()
    assert got == {
        "source": "upload",
        "text": '0x003048c74e4a0000 "first"\n',
        "path": "",
        "entries": 1,
        "error": "",
    }
    assert AuditEntry.objects.filter(action="fabric.node_name_map").count() == audits
    # the page form: same refusal, every line listed
    page = client_for("admin").post(f"/fabric/{fabric.pk}/names/", {"text": bad, "op": "set"})
    assert page.status_code == 400
    body = page.content.decode()
    assert "node-name map:2: &#x27;H-003048c7488b0000&#x27; is not a node GUID" in body
    assert "node-name map:3: the name&#x27;s closing quote is missing" in body
    assert Node.objects.get(fabric=fabric, node_guid="0x003048c74e4a0000").name == "first"


@pytest.mark.django_db
def test_page_form_upload_and_node_page(client_for, realdata):
    import_topology_text("x5", (realdata / PSMN).read_text(), filename="X5.topofile")
    fabric = Fabric.objects.get(name="x5")
    map_text, _ = _psmn_map(realdata)
    from django.core.files.uploadedfile import SimpleUploadedFile

    admin = client_for("admin")
    r = admin.post(f"/fabric/{fabric.pk}/names/", {"file": SimpleUploadedFile("X5.map", map_text.encode()),
                                                   "op": "set"})  # fmt: skip
    assert r.status_code == 302
    page = admin.get(f"/fabric/{fabric.pk}/").content.decode()
    assert "uploaded, 86 names" in page and "86 nodes renamed" in page
    node = Node.objects.get(fabric=fabric, node_guid="0x003048c74e4a0000")
    page = admin.get(f"/fabric/nodes/{node.pk}/").content.decode()
    assert '<span id="node-name">x5570comp1</span>' in page
    assert "(node-name map)" in page and f'"{GENERIC}"</code>' in page
    assert client_for("operator").post(f"/fabric/{fabric.pk}/names/", {"op": "clear"}).status_code == 403


@pytest.mark.django_db
def test_a_get_of_the_form_url_goes_to_the_form_not_a_bare_405(client_for):
    """A reload or a typed address of the POST-only ``names/`` lands on the fabric page's form with
    a message (the page the form lives on), not Django's empty 405; nothing changes."""
    from tests.support.topologies import RAILS

    fabric = import_topology_text("rails", RAILS, filename="rails.net").fabric
    admin = client_for("admin")
    r = admin.get(f"/fabric/{fabric.pk}/names/")
    assert r.status_code == 302 and r["Location"] == f"/fabric/{fabric.pk}/#name-map-form"
    page = admin.get(r["Location"])
    body = page.content.decode()
    assert page.status_code == 200 and 'id="name-map-form"' in body
    assert (
        '<li class="info">The node-name map is set with the form under the fabric&#x27;s details.</li>'
        in body
    )
    fabric.refresh_from_db()
    assert fabric.node_name_map == "" and fabric.node_name_map_path == ""
    # its role and its fabric are checked as for the POST: 403 and 404 pages, not a redirect
    assert client_for("viewer").get(f"/fabric/{fabric.pk}/names/").status_code == 403
    assert admin.get(f"/fabric/{fabric.pk + 1}/names/").status_code == 404


@pytest.mark.django_db
def test_map_path_is_read_at_each_import_and_a_broken_one_keeps_names(tmp_path, settings, realdata):
    settings.WEFT_NODE_NAME_MAP_DIRS = [str(tmp_path)]
    path = tmp_path / "ib-node-name-map"
    path.write_text('0x003048c74e4a0000 "comp-one"\n')
    fabric = Fabric.objects.create(name="x5")
    assert set_node_name_map(fabric, path=str(path))["entries"] == 1
    text = (realdata / PSMN).read_text()
    import_topology_text("x5", text, filename="X5.topofile")
    assert Node.objects.get(fabric=fabric, node_guid="0x003048c74e4a0000").name == "comp-one"
    # the file changes on the server: the next import reads it
    path.write_text('0x003048c74e4a0000 "comp-1"\n0x003048c7488b0000 "comp-2"\n')
    d = import_topology_text("x5", text, filename="X5.topofile")
    assert d.changed == 2
    assert Node.objects.get(fabric=fabric, node_guid="0x003048c7488b0000").name == "comp-2"
    # it breaks: the import goes through with a warning, names kept
    path.write_text('0x003048c74e4a0000 "comp-1\n')
    d = import_topology_text("x5", text, filename="X5.topofile")
    assert d.rows_written == 0
    assert any(w["message"].startswith(f"node-name map not applied, names kept as they were: {path}:1:")
               for w in d.warnings)  # fmt: skip
    assert Node.objects.get(fabric=fabric, node_guid="0x003048c7488b0000").name == "comp-2"


# -- live ---------------------------------------------------------------------------------------

LAB = """
Switch 8 "leaf1" # "MF0;leaf1:MQM8700/U1  "
[1] "h1"[1]
[2] "h2"[1]

Hca 1 "h1" # "MT4119 ConnectX5 Mellanox Technologies"
[1] "leaf1"[1]

Hca 1 "h2" # "MT4119 ConnectX5 Mellanox Technologies"
[1] "leaf1"[2]
"""


@pytest.mark.lab
@pytest.mark.django_db(transaction=True)
def test_live_discovery_applies_the_map(lab_factory, committed_signals):
    lab = lab_factory(LAB)
    fabric = Fabric.objects.create(name="live", tool_env=dict(lab.tool_env))
    g1, g2, sw = lab.guid_of("h1"), lab.guid_of("h2"), lab.guid_of("leaf1")
    set_node_name_map(fabric, text=f'{g1} "gpu01 mlx5_0"\n{g2} "gpu02"\n{sw} "leaf-r1-u40"\n')
    d = discover(fabric)
    assert d.status == "ok", d.warnings
    nodes = {n.node_guid: n for n in Node.objects.filter(fabric=fabric).select_related("host")}
    assert (nodes[g1].name, nodes[g1].host.name) == ("gpu01 mlx5_0", "gpu01")
    assert (nodes[g2].name, nodes[g2].host.name) == ("gpu02", "gpu02")
    assert nodes[g1].description == "MT4119 ConnectX5 Mellanox Technologies"
    # the switch: mapped name, raw description as ibnetdiscover printed it (trailing spaces kept)
    assert nodes[sw].name == "leaf-r1-u40" and nodes[sw].host is None
    printed = re.search(
        rf'^Switch\s+\d+\s+"S-{sw[2:]}"\s+# "([^"]*)"', lab.run(["ibnetdiscover"]).stdout, re.M
    )
    assert printed is not None and nodes[sw].description == printed.group(1)
    assert printed.group(1) == "MF0;leaf1:MQM8700/U1  "
    again = discover(fabric)
    assert again.rows_written == 0
    lab.unlink("h2")
    discover(fabric)
    ev = Event.objects.get(fabric=fabric, code="node.removed")
    assert ev.object_repr == "gpu02" and ev.message.startswith("gpu02 (")
