"""The UFM-compatible API on a stored fabric (no lab): authentication per prefix, roles, paths
with and without a trailing slash, the 503s that keep clients from acting on an empty answer,
PKey changes through the partitions service (audited, pool members left alone), input errors
that name their field, and the reads (systems, links, events, alarms, versions, SM keys)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from accounts.models import ApiToken, AuditEntry
from events.engine import process_pending_events
from events.services import EventSpec, record_events
from fabric.choices import MemberReason
from fabric.models import Fabric, Node, Partition, PartitionMember, Port
from fabric.services.partitions import set_members
from pools.models import Pool
from pools.services.partitions import set_pool_pkey
from ufm.auth import INTEGRATION_GROUP
from ufm.models import UnhealthyPort

from .conftest import basic

pytestmark = pytest.mark.django_db

PKEYS = "/ufmRest/resources/pkeys"


def post(client, path: str, body, method: str = "post"):
    return getattr(client, method)(path, json.dumps(body), content_type="application/json")


def ca_guids(fabric, host: str) -> list[str]:
    return list(
        Port.objects.filter(node__fabric=fabric, node__host__name=host).values_list("port_guid", flat=True)
    )


def bare(guid: str) -> str:
    return guid[2:]


# -- authentication and roles ---------------------------------------------------------------------


def test_basic_auth_roles_and_challenge(fat_tree, ufm, users):
    anon = ufm(None).get(PKEYS)
    assert anon.status_code == 401 and anon["WWW-Authenticate"] == 'Basic realm="ufm"'
    wrong = ufm("viewer", password="nope").get(PKEYS)
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Invalid user name or password."
    assert AuditEntry.objects.filter(action="user.login_failed", username="vic").count() == 1
    garbage = Client(HTTP_AUTHORIZATION="Basic !!notbase64").get(PKEYS)
    assert garbage.status_code == 401
    session = Client()
    session.force_login(users["admin"])
    assert session.get(PKEYS).status_code == 401  # /ufmRest takes Basic only: no session, no CSRF hole

    assert ufm("viewer").get(PKEYS).status_code == 200
    body = {"pkey": "0x5", "guids": [bare(ca_guids(fat_tree, "host001")[0])]}
    for who in ("viewer", "operator"):
        refused = post(ufm(who), PKEYS, body)
        assert refused.status_code == 403 and "UFM integration" in refused.json()["detail"]
    assert not Partition.objects.filter(pkey=5).exists()
    assert post(ufm("admin"), PKEYS, body).status_code == 200

    # a service account: a Viewer in the integration group changes PKeys, nothing else
    users["viewer"].groups.add(Group.objects.get_or_create(name=INTEGRATION_GROUP)[0])
    assert post(ufm("viewer"), PKEYS, {**body, "pkey": "0x6"}).status_code == 200
    isolate = post(ufm("viewer"), "/ufmRest/app/unhealthy_ports", {"ports": ["0c42a10300a00200_1"],
                   "ports_policy": "UNHEALTHY"}, method="put")  # fmt: skip
    assert isolate.status_code == 403 and "Admin" in isolate.json()["detail"]
    entry = AuditEntry.objects.filter(action="partition.add_members").latest("id")
    assert entry.username == "vic" and entry.changes["added"] == 1


def test_basic_auth_is_throttled_like_sign_in(fat_tree, ufm, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert ufm("viewer", password="wrong").get(PKEYS).status_code == 401
    locked = ufm("viewer", password="wrong").get(PKEYS)
    assert locked.status_code == 429 and locked.json()["detail"].startswith("Too many failed sign-ins")
    right = ufm("viewer").get(PKEYS)  # even the right password, until the cool-off
    assert right.status_code == 429 and right["Retry-After"].isdigit()


def test_a_locked_user_locks_neither_other_users_of_the_address_nor_tokens(fat_tree, ufm, users, settings):
    """Issue 22: five failures from one address locked every password sign-in from it, the UFM
    Basic-auth clients of that host included. The lock is per (user name, address); tokens
    (``/ufmRestV3`` Basic token, ``Authorization: Token``) never go through it."""
    key = post(ufm("viewer"), "/ufmRest/app/tokens", {}).json()["access_token"]
    for name in [
        "guess-a",
        "guess-b",
        "guess-c",
        "guess-d",
        "guess-e",
        "guess-f",
    ]:  # other names, one address
        assert Client(HTTP_AUTHORIZATION=basic(name, "wrong")).get(PKEYS).status_code == 401
    assert ufm("viewer").get(PKEYS).status_code == 200
    for _ in range(settings.AXES_FAILURE_LIMIT):  # now the integration's own user name
        ufm("viewer", password="wrong").get(PKEYS)
    assert ufm("viewer").get(PKEYS).status_code == 429
    assert ufm("admin").get(PKEYS).status_code == 200  # another user of the same host
    assert Client(HTTP_AUTHORIZATION=f"Basic {key}").get("/ufmRestV3/resources/pkeys").status_code == 200
    assert Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/fabric/fabrics/").status_code == 200


def test_token_for_ufmrestv3(fat_tree, ufm, users):
    resp = post(ufm("admin"), "/ufmRest/app/tokens", {})
    assert resp.status_code == 200
    key = resp.json()["access_token"]
    assert ApiToken.objects.get(user=users["admin"]).prefix == key[:8]
    v3 = Client(HTTP_AUTHORIZATION=f"Basic {key}")
    assert v3.get("/ufmRestV3/app/ufm_version").json() == {"ufm_release_version": "6.19.0"}
    assert post(v3, "/ufmRestV3/resources/pkeys/add", {"pkey": "0x31a"}).status_code == 200
    assert Client(HTTP_AUTHORIZATION=f"Basic {key}").get("/ufmRest/app/ufm_version").status_code == 401
    bad = Client(HTTP_AUTHORIZATION="Basic 0123456789abcdef0123456789abcdef01234567").get(
        "/ufmRestV3/app/smconf"
    )
    assert bad.status_code == 401 and bad["WWW-Authenticate"] == 'Basic realm="ufm"'
    # a Basic user:password does not pass as a token
    assert Client(HTTP_AUTHORIZATION=basic("ada", "pw-ada")).get("/ufmRestV3/app/smconf").status_code == 401


def test_ufmrestv2_session_from_dologin_keeps_csrf(fat_tree, users):
    client = Client(enforce_csrf_checks=True)
    assert client.post("/dologin", {"httpd_username": "ada", "httpd_password": "bad"}).status_code == 401
    resp = client.post("/dologin", {"httpd_username": "ada", "httpd_password": "pw-ada"})
    assert resp.status_code == 200 and resp.json() == {"username": "ada"}
    assert client.get("/ufmRestV2/resources/ports?sys_type=Computer").status_code == 200
    body = json.dumps({"pkey": "0x7", "guids": [bare(ca_guids(fat_tree, "host002")[0])]})
    refused = client.post("/ufmRestV2/resources/pkeys", body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    ok = client.post("/ufmRestV2/resources/pkeys", body, content_type="application/json",
                     HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)  # fmt: skip
    assert ok.status_code == 200 and Partition.objects.filter(pkey=7).exists()
    assert client.get("/dologin").status_code == 405


def test_both_path_forms_without_redirects(fat_tree, ufm):
    c = ufm("admin")
    guid = bare(ca_guids(fat_tree, "host001")[0])
    for path in (PKEYS, PKEYS + "/"):
        assert c.get(path + "?guids_data=true").status_code == 200
        assert post(c, path, {"pkey": "0x9", "guids": [guid]}).status_code == 200
    for path in ("/ufmRest/resources/ports", "/ufmRest/resources/ports/", "/ufmRest/app/ufm_version/",
                 "/ufmRest/resources/pkeys/0x9/", "/ufmRest/actions/remove_guids_from_pkey/"):  # fmt: skip
        assert c.get(path).status_code in (200, 405), path
    assert c.get("/ufmRest/resources/nothing").status_code == 404


# -- never an empty answer while Weft knows nothing -----------------------------------------------


def test_503_before_anything_is_known(db, ufm, settings):
    c = ufm("viewer")
    none = c.get("/ufmRest/resources/ports")
    assert none.status_code == 503 and none["Retry-After"] == "30" and "no fabric" in none.json()["error"]
    Fabric.objects.create(name="empty", tool_env={"X": "1"}, discovery_enabled=False)
    for path in ("/ufmRest/resources/ports", "/ufmRest/resources/systems", "/ufmRest/resources/links"):
        resp = c.get(path)
        assert resp.status_code == 503 and "not been discovered" in resp.json()["error"], path
    assert c.get("/ufmRest/app/ufm_version").status_code == 200  # nothing to describe there
    Fabric.objects.create(name="second")
    several = c.get("/ufmRest/resources/pkeys")
    assert several.status_code == 503 and "WEFT_UFM_FABRIC" in several.json()["error"]
    settings.WEFT_UFM_FABRIC = "second"
    assert c.get("/ufmRest/resources/pkeys").status_code == 200
    settings.WEFT_UFM_FABRIC = "gone"
    assert "names fabric 'gone'" in c.get("/ufmRest/resources/pkeys").json()["error"]


@pytest.mark.backend
def test_database_fault_is_503_not_an_empty_list(fat_tree, ufm):
    c = ufm("viewer")
    assert len(c.get("/ufmRest/resources/ports").json()) > 0
    table = Node._meta.db_table
    with connection.cursor() as cur:  # a real fault: the table is gone (rolled back with the test)
        cur.execute(f"ALTER TABLE {table} RENAME TO {table}_away")
    resp = c.get("/ufmRest/resources/ports?sys_type=Computer")
    assert resp.status_code == 503 and resp.json()["error"] == "the database is unavailable"


# -- PKeys through the partitions service ----------------------------------------------------------


def test_pkey_lifecycle_and_pool_members(fat_tree, ufm):
    c = ufm("admin")
    g1, g2, g3 = (bare(ca_guids(fat_tree, h)[0]) for h in ("host001", "host002", "host003"))
    made = post(c, PKEYS, {"pkey": "0x0005", "guids": [g1, g2], "memberships": ["full", "limited"]})
    assert made.json() == {"pkey": "0x5", "created": True, "added": 2, "removed": 0, "changed": 0, "kept": 0,
                           "applying": False}  # fmt: skip
    part = Partition.objects.get(fabric=fat_tree, pkey=5)
    assert (part.name, part.ipoib, part.indx0) == ("api_pkey_0x5", True, False)  # UFM's defaults
    one = c.get("/ufmRest/resources/pkeys/0x5?guids_data=true&qos_conf=true").json()
    assert one == {
        "partition": "api_pkey_0x5",
        "ip_over_ib": True,
        "guids": sorted([{"guid": g1, "membership": "full", "index0": False},
                         {"guid": g2, "membership": "limited", "index0": False}], key=lambda m: m["guid"]),
        "qos_conf": {"mtu_limit": 2, "service_level": 0, "rate_limit": 10},
    }  # fmt: skip
    # a second add with flags: index0 is the partition's (OpenSM's indx0)
    post(c, PKEYS + "/", {"pkey": "5", "guids": [g3], "index0": True, "ip_over_ib": "false"}, method="put")
    part.refresh_from_db()
    assert (part.indx0, part.ipoib, part.members.count()) == (True, False, 3)
    # a pool takes g3 and later lets it go: the member the client added stays
    set_members(part, ["0x" + g3], reason=MemberReason.POOL)
    set_members(part, [], reason=MemberReason.POOL)
    assert part.members.filter(port_guid="0x" + g3).exists()
    # a pool member is not removed by the API (the pool would put it back)
    pool_guid = bare(ca_guids(fat_tree, "host004")[0])
    set_members(part, ["0x" + pool_guid], reason=MemberReason.POOL)
    gone = post(
        c,
        "/ufmRest/actions/remove_guids_from_pkey",
        {"pkey": "0x5", "guids": [g1, pool_guid, "0" * 15 + "1"]},
    )
    assert gone.json() == {"pkey": "0x5", "removed": 1, "kept": [pool_guid], "applying": False}
    assert sorted(part.members.values_list("reason", flat=True)) == ["extra", "extra", "pool"]

    qos = post(
        c, PKEYS + "/qos_conf", {"pkey": "0x5", "mtu_limit": 4, "service_level": 3, "rate_limit": 2.5}, "put"
    )
    assert qos.json()["changed"] is True
    assert c.get("/ufmRest/resources/pkeys/0x5?qos_conf=true").json()["qos_conf"] == {
        "mtu_limit": 4, "service_level": 3, "rate_limit": 2.5,
    }  # fmt: skip
    assert post(c, PKEYS + "/qos_conf", {"pkey": "0x55", "mtu_limit": 4}, "put").status_code == 404
    empty = post(c, PKEYS + "/add", {"pkey": "0x12", "partition_name": "user_partition", "ip_over_ib": False})
    assert empty.status_code == 200
    again = post(c, PKEYS + "/add", {"pkey": "0x12"})
    assert again.status_code == 400 and again.json() == {
        "error": "pkey: 0x12 already exists",
        "field": "pkey",
    }
    assert Partition.objects.get(pkey=0x12).name == "user_partition"

    listed = c.get(PKEYS + "?guids_data=true").json()
    assert list(listed) == ["0x7fff", "0x5", "0x12"] and listed["0x12"]["guids"] == []
    assert c.delete("/ufmRest/resources/pkeys/0x12").json()["deleted"] is True
    assert c.delete("/ufmRest/resources/pkeys/0x12").status_code == 404
    assert c.get("/ufmRest/resources/pkeys/0x12").json() == {}  # UFM's "not found"
    default = c.delete("/ufmRest/resources/pkeys/0x7fff")
    assert default.status_code == 409 and "default partition" in default.json()["error"]
    actions = set(AuditEntry.objects.filter(username="ada").values_list("action", flat=True))
    assert {"partition.create", "partition.add_members", "partition.update", "partition.remove_members",
            "partition.delete"} <= actions  # fmt: skip


def test_a_pools_pkey_is_changed_through_the_pool_not_deleted_here(fat_tree, ufm):
    pool = Pool.objects.create(name="vision", fabric=fat_tree)
    set_pool_pkey(pool, 0x21)
    c = ufm("admin")
    guid = bare(ca_guids(fat_tree, "host006")[0])
    assert post(c, PKEYS, {"pkey": "0x21", "guids": [guid]}).status_code == 200  # extra members are fine
    refused = c.delete("/ufmRest/resources/pkeys/0x21")
    assert refused.status_code == 409 and "belongs to pool vision" in refused.json()["error"]
    assert Partition.objects.filter(pkey=0x21).exists()


def test_pending_change_without_a_partitions_file_waits_for_an_admin(fat_tree, ufm):
    resp = post(ufm("admin"), PKEYS, {"pkey": "0x44", "guids": [bare(ca_guids(fat_tree, "host001")[0])]})
    assert resp.json()["applying"] is False
    assert Partition.objects.get(pkey=0x44).applied_state == "pending"


@pytest.mark.parametrize(
    ("path", "method", "body", "field"),
    [
        (PKEYS, "post", {"pkey": 5, "guids": []}, "pkey"),
        (PKEYS, "post", {"pkey": "0x7fff", "guids": []}, "pkey"),
        (PKEYS, "post", {"pkey": "0x5", "guids": ["abc"]}, "guids"),
        (PKEYS, "put", {"pkey": "0x5", "guids": ["1070fd0300176625"], "membership": "both"}, "membership"),
        (PKEYS, "post", "not json", "body"),
        (PKEYS + "/add", "post", {"pkey": "0x5", "rate_limit": 15}, "rate_limit"),
        (PKEYS + "/qos_conf", "put", {"pkey": "0x5", "service_level": 99}, "service_level"),
        (PKEYS + "/hosts", "post", {"pkey": "0x5", "hosts_names": "host[001-"}, "hosts_names"),
        (PKEYS + "/hosts", "post", {"pkey": "0x5", "hosts_names": "nosuch[1-3]"}, "hosts_names"),
        ("/ufmRest/actions/remove_guids_from_pkey", "post", {"pkey": "0x5"}, "guids"),
        ("/ufmRest/app/unhealthy_ports", "put", {"ports": ["x_1"], "ports_policy": "UNHEALTHY"}, "ports"),
        ("/ufmRest/resources/ports?sys_type=Toaster", "get", None, "sys_type"),
        ("/ufmRest/resources/ports?system=xyz", "get", None, "system"),
        ("/ufmRest/resources/links?rpp=0", "get", None, "rpp"),
        ("/ufmRest/resources/pkeys/0x5?guids_data=maybe", "get", None, "guids_data"),
        ("/ufmRest/resources/pkeys/zz", "get", None, "pkey"),
    ],
)
def test_bad_input_is_400_naming_the_field(fat_tree, ufm, path, method, body, field):
    c = ufm("admin")
    if body is None:
        resp = c.get(path)
    elif isinstance(body, str):
        resp = getattr(c, method)(path, body, content_type="application/json")
    else:
        resp = post(c, path, body, method)
    assert resp.status_code == 400, resp.content
    assert resp.json()["field"] == field and resp.json()["error"].startswith(f"{field}: ")
    assert not Partition.objects.exists() and not PartitionMember.objects.exists()


def test_hosts_by_slurm_host_list(fat_tree, ufm):
    c = ufm("admin")
    added = post(c, PKEYS + "/hosts", {"hosts_names": "host[001-002],login01", "pkey": "0x6", "ip_over_ib": "True",
                                       "index0": False})  # fmt: skip
    assert added.status_code == 200 and (added.json()["guids"], added.json()["unknown_hosts"]) == (
        2,
        ["login01"],
    )
    part = Partition.objects.get(pkey=6)
    expected = sorted(ca_guids(fat_tree, "host001") + ca_guids(fat_tree, "host002"))
    assert sorted(part.members.values_list("port_guid", flat=True)) == expected
    removed = c.delete("/ufmRest/resources/pkeys/0x6/hosts/host[001,003]")
    assert removed.status_code == 200 and removed.json()["removed"] == 1
    assert list(part.members.values_list("port_guid", flat=True)) == ca_guids(fat_tree, "host002")
    assert c.delete("/ufmRest/resources/pkeys/0x66/hosts/host002").status_code == 404


def test_isolation_refusals_and_a_failing_tool(fat_tree, ufm):
    c = ufm("admin")
    host_port = Port.objects.get(node__host__name="host001")
    leaf = host_port.remote.node
    cases = [
        (f"{bare(host_port.node.node_guid)}_1", "is a port of host001 mlx5_0"),
        ("0123456789abcdef_1", "no node of fabric ft"),
        (f"{bare(leaf.node_guid)}_39", "has no physical port 39"),
    ]
    for name, why in cases:
        resp = post(c, "/ufmRest/app/unhealthy_ports", {"ports": [name], "ports_policy": "UNHEALTHY"}, "put")
        assert resp.status_code == 400 and why in resp.json()["error"], resp.content
    fat_tree.master_sm_guid = host_port.port_guid
    fat_tree.save()
    sm_link = post(c, "/ufmRest/app/unhealthy_ports",
                   {"ports": [f"{bare(leaf.node_guid)}_{host_port.remote.port_num}"], "ports_policy": "UNHEALTHY"}, "put")  # fmt: skip
    assert sm_link.status_code == 400 and "master SM" in sm_link.json()["error"]
    # a stored fabric has no LIDs from a netfile: the tool is not run, the answer says why, nothing stored
    other = f"{bare(leaf.node_guid)}_2"
    failed = post(c, "/ufmRest/app/unhealthy_ports", {"ports": [other], "ports_policy": "UNHEALTHY"}, "put")
    assert failed.status_code == 502
    assert failed.json()["ports"] == [{"port": other, "done": False,
                                       "error": f"switch {leaf.name} has no LID known (rediscover the fabric)"}]  # fmt: skip
    assert not UnhealthyPort.objects.exists() and c.get("/ufmRest/app/unhealthy_ports").json() == []


# -- reads ---------------------------------------------------------------------------------------


def test_systems_links_and_paging(fat_tree, ufm):
    c = ufm("viewer")
    systems = c.get("/ufmRest/resources/systems").json()
    assert sorted((s["type"], s["system_name"]) for s in systems if s["type"] == "host") == [
        ("host", f"host00{i}") for i in range(1, 7)
    ]
    switches = c.get("/ufmRest/resources/systems?type=switch").json()
    # the cabled ports each: a leaf's 2 hosts and 2 spines, a spine's 3 leaves
    assert sorted((s["system_name"][4:11], len(s["ports"])) for s in switches) == [
        ("leaf-01", 4), ("leaf-02", 4), ("leaf-03", 4), ("spine-0", 3), ("spine-0", 3),
    ]  # fmt: skip
    assert all(s["type"] == "switch" and s["ports"][0].startswith(s["guid"] + "_") for s in switches)
    links = c.get("/ufmRest/resources/links").json()
    assert len(links) == 12  # 6 host cables + 3 leaves x 2 spines
    paged = c.get("/ufmRest/resources/links?page_number=2&rpp=5").json()
    assert (paged["total"], paged["page_number"], paged["rpp"], paged["data"]) == (12, 2, 5, links[5:10])
    sdk = c.get("/ufmRest/resources/links?page_number=1&rpp=1000000000").json()  # the UFM SDK's request
    assert sdk["data"] == links


def test_events_alarms_and_versions_move(fat_tree, ufm):
    c = ufm("viewer")
    before = c.get("/ufmRest/app/versioning").json()
    assert set(before) == {
        "switches_version",
        "ports_version",
        "links_version",
        "alarms_version",
        "events_version",
    }
    assert all(isinstance(v, int) for v in before.values())
    assert c.get("/ufmRest/app/versioning").json() == before  # stable while nothing changes
    link_key = "0x0c42a10300a00200/1-0x1c34da0300400010/1"
    record_events(fat_tree, [EventSpec("link.down", "link leaf-01 1 is down", object_type="link",
                                       object_key=link_key, object_repr="leaf-01 1 - host001 1")])  # fmt: skip
    process_pending_events(fat_tree.pk)
    after = c.get("/ufmRest/app/versioning").json()
    assert (
        after["events_version"] > before["events_version"]
        and after["alarms_version"] != before["alarms_version"]
    )
    assert after["ports_version"] == before["ports_version"]
    Port.objects.filter(node__host__name="host001").update(state=1)
    fat_tree.discoveries.create(source="notice")  # every port writer records a Discovery
    assert c.get("/ufmRest/app/versioning").json()["ports_version"] != before["ports_version"]

    events = c.get("/ufmRest/app/events").json()
    assert events[0]["type"] == "link.down" and events[0]["severity"] == "Critical"
    assert events[0]["object_name"] == "leaf-01 1 - host001 1" and events[0]["object_path"] == link_key
    assert [e["type"] for e in c.get("/ufmRest/app/events?severity=Info").json()] == ["fabric.discovered"]
    alarms = c.get("/ufmRest/app/alarms").json()
    assert [(a["type"], a["severity"], a["counter"]) for a in alarms] == [("link.down", "Critical", 1)]


def test_smconf_keys_only_for_an_admin(fat_tree, ufm, settings, realdata):
    assert ufm("viewer").get("/ufmRest/app/smconf").json() == {"subnet_prefix": "0xfe80000000000000"}
    settings.WEFT_OPENSM_CONF = str(realdata / "opensm/scinet10_opensm.conf")
    assert ufm("admin").get("/ufmRest/app/smconf").json() == {
        "subnet_prefix": "0xfe80000000000000", "m_key": "0x0000000000000000", "sm_key": "0x0000000000000001",
        "sa_key": "0x0000000000000001", "m_key_per_port": False,
    }  # fmt: skip
