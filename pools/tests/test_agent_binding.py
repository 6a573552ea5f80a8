"""Host agents and the hosts they may report for (``pools.services.agents``), the agent-token API
(``/api/pools/agent-tokens/``), and the report size limit (413) and malformed reports (400
located), none of which leaves a traceback in the log."""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from accounts.models import AuditEntry
from accounts.roles import set_role
from accounts.tokens import create_token
from fabric.models import Host
from pools.api.permissions import AGENT_GROUP
from pools.models import AgentBinding, Gpu, HostInventory
from pools.services import agents
from tests.support.agent_reports import XML, body


@pytest.fixture
def agent(base_fabric, users):
    """An agent service account (a Viewer in the Host agent group) and a client with its token."""
    user = get_user_model().objects.create_user("agent-01")
    set_role(user, "viewer")
    user.groups.add(Group.objects.get_or_create(name=AGENT_GROUP)[0])
    issued = create_token(user, "agent-01", actor=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {issued.key}")
    client.token = issued.token
    return client


def _host(name: str) -> Host:
    return Host.objects.get(fabric__name="base", name=name)


def _tracebacks(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_agent_token_binds_on_first_report_then_reports_for_that_host_only(agent, caplog):
    r = agent.post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 200 and r.json()["host"] == "host001"
    binding = AgentBinding.objects.get()
    assert (binding.token_id, binding.host, binding.via) == (agent.token.pk, _host("host001"), "first_report")
    entry = AuditEntry.objects.get(action="agent.bind")
    assert entry.username == "agent-01" and entry.changes["hosts"] == ["host001 (base)"]
    assert entry.changes["via"] == "first_report"
    # another host: refused, nothing of it stored
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", body(host="host002", topo=""), format="json")
    assert r.status_code == 403 and r.json()["code"] == "host_not_bound"
    assert "bound to host001 (base): it may not report for host002 (base)" in r.json()["detail"]
    assert not HostInventory.objects.filter(host__name="host002").exists()
    assert AgentBinding.objects.count() == 1 and not _tracebacks(caplog)
    # its own host again: accepted, no second binding
    assert agent.post("/api/pools/agent/", body(), format="json").status_code == 200
    assert AgentBinding.objects.count() == 1 and AuditEntry.objects.filter(action="agent.bind").count() == 1


def test_refused_report_binds_nothing(agent):
    r = agent.post("/api/pools/agent/", body(nvidia_smi_xml="<nvidia_smi_log><gpu>"), format="json")
    assert r.status_code == 400 and r.json()["field"] == "nvidia_smi_xml"
    assert not AgentBinding.objects.exists()  # a bad first report does not bind the token
    assert agent.post("/api/pools/agent/", body(host="host002", topo=""), format="json").status_code == 200
    assert AgentBinding.objects.get().host == _host("host002")


def test_unbound_agent_token_is_refused_when_binding_on_first_report_is_off(agent, settings, admin):
    settings.WEFT_AGENT_BIND_ON_FIRST_REPORT = False
    r = agent.post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 403 and "bound to no host: an Admin binds it first" in r.json()["detail"]
    assert not AgentBinding.objects.exists() and not Gpu.objects.exists()
    r = admin.patch(
        f"/api/pools/agent-tokens/{agent.token.pk}/", {"hosts": [_host("host001").pk]}, format="json"
    )
    assert r.status_code == 200 and r.json()["bindings"][0]["via"] == "admin"
    assert agent.post("/api/pools/agent/", body(), format="json").status_code == 200


def test_admin_binds_and_unbinds_through_the_api(agent, admin, client_for, users):
    url = f"/api/pools/agent-tokens/{agent.token.pk}/"
    listed = admin.get("/api/pools/agent-tokens/", {"user__username": "agent-01"}).json()["results"]
    assert [(t["id"], t["hosts"], t["bindings"]) for t in listed] == [(agent.token.pk, [], [])]
    h1, h2 = _host("host001"), _host("host002")
    r = admin.patch(url, {"hosts": [h2.pk]}, format="json")
    assert r.status_code == 200 and r.json()["hosts"] == [h2.pk]
    assert r.json()["bindings"][0]["host"]["name"] == "host002"
    entry = AuditEntry.objects.get(action="agent.hosts")
    assert (entry.username, entry.object_id) == ("ada", str(agent.token.pk))
    assert entry.changes | {"token": 0} == {
        "token": 0, "prefix": agent.token.prefix, "owner": "agent-01", "hosts": [[], ["host002 (base)"]],
        "bound": ["host002 (base)"], "unbound": [],
    }  # fmt: skip
    assert agent.post("/api/pools/agent/", body(), format="json").status_code == 403  # host001: not its host
    assert [t["id"] for t in admin.get("/api/pools/agent-tokens/", {"host": h2.pk}).json()["results"]] == [
        agent.token.pk
    ]
    assert agent.token.pk not in {
        t["id"] for t in admin.get("/api/pools/agent-tokens/", {"bound": "false"}).json()["results"]
    }
    # unbinding: the agent token binds again on its next report
    r = admin.put(url, {"hosts": []}, format="json")
    assert r.status_code == 200 and r.json()["hosts"] == []
    assert AuditEntry.objects.filter(action="agent.hosts").latest("pk").changes["unbound"] == [
        "host002 (base)"
    ]
    assert agent.post("/api/pools/agent/", body(), format="json").status_code == 200
    assert AgentBinding.objects.get().host == h1
    # an unchanged list writes no audit entry; bad input is a 400 naming the field
    admin.put(url, {"hosts": [h1.pk]}, format="json")
    assert AuditEntry.objects.filter(action="agent.hosts").count() == 2
    r = admin.patch(url, {"hosts": [h1.pk, h1.pk]}, format="json")
    assert r.status_code == 400 and "twice" in r.json()["hosts"][0]
    r = admin.patch(url, {"hosts": [999999]}, format="json")
    assert r.status_code == 400 and "hosts" in r.json()
    # Operators neither list nor bind; an Admin who is not a superuser leaves a superuser's token alone
    assert client_for("operator").patch(url, {"hosts": []}, format="json").status_code == 403
    assert client_for("operator").get("/api/pools/agent-tokens/").status_code == 403
    root = get_user_model().objects.create_superuser("root", "root@example.org", "pw-root")
    token = create_token(root, "root's", actor=root).token
    r = admin.patch(f"/api/pools/agent-tokens/{token.pk}/", {"hosts": [h1.pk]}, format="json")
    assert r.status_code == 403 and not AgentBinding.objects.filter(token=token).exists()


def test_operator_token_is_free_until_an_admin_binds_it(base_fabric, users, admin, client_for):
    key = create_token(users["operator"], "script", actor=users["operator"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key.key}")

    def own(host: str) -> dict:  # each host its own GPUs (another host's UUIDs are a 409)
        return body(host=host, topo="", nvidia_smi_xml=XML.replace("GPU-", f"GPU-{host}-"))

    for host in ("host001", "host002", "host001"):
        assert client.post("/api/pools/agent/", own(host), format="json").status_code == 200
    assert not AgentBinding.objects.exists()
    admin.patch(f"/api/pools/agent-tokens/{key.token.pk}/", {"hosts": [_host("host001").pk]}, format="json")
    r = client.post("/api/pools/agent/", own("host002"), format="json")
    assert r.status_code == 403 and r.json()["code"] == "host_not_bound"
    # a signed-in Operator (a session, no token) posts for any host
    assert client_for("operator").post("/api/pools/agent/", own("host002"), format="json").status_code == 200


def test_agent_signed_in_without_a_token_is_refused(agent):
    client = APIClient()
    client.force_login(get_user_model().objects.get(username="agent-01"))
    r = client.post("/api/pools/agent/", body(), format="json")
    assert r.status_code == 403 and "reports with an API token" in r.json()["detail"]
    assert not Gpu.objects.exists()


def test_first_report_loses_a_race_to_another_host(agent):
    """Two first reports of one token: the one that binds second (after the first committed) is
    refused inside its transaction, and stores nothing."""
    token = agent.token
    assert agents.check_report(token.user, token, _host("host001")) is True  # the check, before the race
    agents.bind_first_report(token, _host("host002"))  # the other report wins
    with pytest.raises(agents.AgentRefused, match="just bound to host002"):
        agents.bind_first_report(token, _host("host001"))
    assert list(AgentBinding.objects.values_list("host__name", flat=True)) == ["host002"]


# --- size limit and malformed reports ------------------------------------------------------------


def test_a_report_above_the_limit_is_413_without_reading_it(agent, settings, caplog):
    settings.WEFT_AGENT_MAX_BODY_BYTES = 4096
    big = json.dumps(body(nvidia_smi_xml=XML + "<!--" + "x" * 5000 + "-->")).encode()
    size = len(big)
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", big, content_type="application/json")
    assert r.status_code == 413
    assert r.json() == {
        "detail": f"the report is {size} bytes, above the limit of 4096 bytes (WEFT_AGENT_MAX_BODY_BYTES)",
        "code": "too_large", "size": size, "limit": 4096,
    }  # fmt: skip
    assert not Gpu.objects.exists() and not AgentBinding.objects.exists()
    assert not _tracebacks(caplog)
    assert [r.levelname for r in caplog.records if r.name == "django.request"] == ["WARNING"]
    # anonymous: 401 first, whatever the size
    assert APIClient().post("/api/pools/agent/", big, content_type="application/json").status_code == 401
    assert agent.post("/api/pools/agent/", body(), format="json").status_code == 200  # under it


def test_the_default_limit_leaves_room_for_real_reports(realdata, settings):
    """Every real report, as the agent posts it (JSON), is far below the default limit."""
    folder = realdata / "nvidia-smi"
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent")
    sizes = {p.name: len(json.dumps(body(nvidia_smi_xml=p.read_text())).encode()) for p in folder.iterdir()}
    assert settings.WEFT_AGENT_MAX_BODY_BYTES == 4 * 1024 * 1024
    assert max(sizes.values()) * 10 < settings.WEFT_AGENT_MAX_BODY_BYTES, sizes


@pytest.mark.parametrize(
    "xml, where",
    [
        (XML[: XML.index("<fb_memory_usage>")], ("nvidia_smi_xml", 5, "")),  # cut short
        ('<?xml version="1.0"?>\n<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]>\n<nvidia_smi_log>&e;'
         "</nvidia_smi_log>", ("nvidia_smi_xml", 2, "")),  # an external entity: refused, never fetched
        ("<?xml version='1.0'?>\n<report/>", ("nvidia_smi_xml", 1, "report")),
        (XML.replace("<total>81559 MiB</total>", "<total>lots</total>", 1),
         ("nvidia_smi_xml", 0, "gpu[0]/fb_memory_usage/total")),
    ],
)  # fmt: skip
def test_malformed_xml_is_a_located_400_and_no_traceback(agent, caplog, xml, where):
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", body(nvidia_smi_xml=xml), format="json")
    assert r.status_code == 400, r.content
    assert (r.json()["field"], r.json()["line"], r.json()["element"]) == where
    assert not Gpu.objects.exists() and not AgentBinding.objects.exists()
    assert not _tracebacks(caplog)


# --- a report describes its own host only (issue 22) ----------------------------------------------


def _xml(uuids: list[str], total: str = "81559 MiB") -> str:
    gpus = "".join(
        f'<gpu id="00000000:{i + 7:02x}:00.0"><product_name>NVIDIA H100</product_name><uuid>{u}</uuid>'
        f"<minor_number>{i}</minor_number><fb_memory_usage><total>{total}</total><used>4 MiB</used>"
        f"</fb_memory_usage><gpu_recovery_action>None</gpu_recovery_action></gpu>"
        for i, u in enumerate(uuids)
    )
    return (f'<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>550.54</driver_version>'
            f"<attached_gpus>{len(uuids)}</attached_gpus>{gpus}</nvidia_smi_log>\n")  # fmt: skip


def test_a_report_listing_another_hosts_gpus_is_a_409_conflict_never_a_move(agent, operator, caplog):
    """host001's agent posts its own 2 GPUs plus host002's 2: refused, audited, alarmed; host002's
    GPUs stay where they are, and nothing of the report is written (not even host001's part)."""
    from events.models import Alarm, Event

    mine, theirs = ["GPU-h1-0", "GPU-h1-1"], ["GPU-h2-0", "GPU-h2-1"]
    r = operator.post("/api/pools/agent/", {"host": "host002", "nvidia_smi_xml": _xml(theirs)}, format="json")
    assert r.status_code == 200, r.content
    r = agent.post("/api/pools/agent/", {"host": "host001", "nvidia_smi_xml": _xml(mine)}, format="json")
    assert r.status_code == 200 and AgentBinding.objects.get().host == _host("host001")
    before = HostInventory.objects.get(host__name="host001").reported_at
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", {"host": "host001", "nvidia_smi_xml": _xml(mine + theirs)},
                       format="json")  # fmt: skip
    assert r.status_code == 409, r.content
    body = r.json()
    assert body["code"] == "gpu_conflict" and "host002 (base)" in body["detail"]
    assert [(c["uuid"], c["host"], c["state"]) for c in body["conflicts"]] == [
        ("GPU-h2-0", "host002", "free"), ("GPU-h2-1", "host002", "free")]  # fmt: skip
    assert sorted(Gpu.objects.filter(uuid__in=theirs).values_list("host__name", flat=True)) == ["host002"] * 2
    assert Gpu.objects.filter(host__name="host001").count() == 2
    assert HostInventory.objects.get(host__name="host001").reported_at == before
    entry = AuditEntry.objects.get(action="gpu.conflict")
    assert entry.username == "agent-01" and entry.object_repr == "host001"
    assert [c["uuid"] for c in entry.changes["conflicts"]] == theirs
    event = Event.objects.get(code="gpu.uuid_conflict")
    assert (event.object_type, event.object_key) == ("host", "host001")
    alarm = Alarm.objects.get(code="gpu.uuid_conflict")
    assert (alarm.object_key, alarm.state) == ("host001", "active")
    assert not _tracebacks(caplog)


def test_import_gpus_refuses_a_move_without_move_and_moves_with_it(base_fabric):
    from django.core.management import CommandError, call_command

    from pools.parsers import parse_gpu_report
    from pools.services.inventory import ingest_gpu_report

    ingest_gpu_report(_host("host002"), parse_gpu_report(_xml(["GPU-m"])), source="import")
    path = __import__("pathlib").Path(__import__("tempfile").mkdtemp()) / "r.xml"
    path.write_text(_xml(["GPU-m"]))
    with pytest.raises(CommandError, match="belong to another host"):
        call_command("import_gpus", str(path), "--host", "host001")
    assert Gpu.objects.get(uuid="GPU-m").host.name == "host002"
    call_command("import_gpus", str(path), "--host", "host001", "--move")
    assert Gpu.objects.get(uuid="GPU-m").host.name == "host001"


@pytest.mark.parametrize("total", ["99999999999999999999 MiB", "4294967296 MiB"])
def test_an_absurd_memory_value_is_a_located_400(agent, caplog, total):
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", {"host": "host001", "nvidia_smi_xml": _xml(["GPU-x"], total)},
                       format="json")  # fmt: skip
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "nvidia_smi_xml" and r.json()["where"] == "gpu[0] GPU-x memory_total_mib"
    assert "outside 0..2147483647" in r.json()["detail"]
    assert not Gpu.objects.exists() and not _tracebacks(caplog)


def test_gpus_per_report_and_per_host_are_bounded(agent, settings):
    settings.WEFT_GPUS_PER_REPORT_MAX = 3
    settings.WEFT_GPUS_PER_HOST_MAX = 5
    post = lambda uuids: agent.post(  # noqa: E731
        "/api/pools/agent/", {"host": "host001", "nvidia_smi_xml": _xml(uuids)}, format="json"
    )
    r = post([f"GPU-{i}" for i in range(4)])
    assert r.status_code == 400 and "lists 4 GPUs, above WEFT_GPUS_PER_REPORT_MAX=3" in r.json()["detail"]
    assert not Gpu.objects.exists()
    assert post(["GPU-0", "GPU-1", "GPU-2"]).status_code == 200
    # the old three are kept (missing): three new ones would make six rows
    r = post(["GPU-3", "GPU-4", "GPU-5"])
    assert r.status_code == 400 and "would keep 6 GPU rows" in r.json()["detail"]
    assert post(["GPU-3", "GPU-4"]).status_code == 200
    assert Gpu.objects.filter(host__name="host001").count() == 5


@pytest.mark.parametrize("rate", ["NaN", "inf", "-inf"])
def test_a_non_finite_hca_rate_is_a_400_on_the_field(agent, caplog, rate):
    """A port rate of "NaN"/"inf" (DRF's FloatField takes them) is refused on its field, not stored
    (JSON has no NaN: it was a misleading 409 "conflict" on SQLite, and on PostgreSQL a stored
    NaN the inventory's readers could not serialise)."""
    hcas = [{"name": "mlx5_0", "ports": [{"port_num": 1, "rate_gbps": rate}]}]
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", body(hcas=hcas), format="json")
    assert r.status_code == 400, r.content
    assert "rate_gbps" in r.json()["hcas"][0]["ports"][0], r.json()
    assert not HostInventory.objects.exists() and not AgentBinding.objects.exists()
    assert not _tracebacks(caplog)


@pytest.mark.parametrize(
    "uuid, total, where, says",
    [
        ("GPU-\u202eabc", "81559 MiB", "gpu[0] uuid", "U+202E"),  # reads reversed on every page
        ("GPU-" + "a" * 200, "81559 MiB", "gpu[0] uuid", "longer than 64"),  # varchar(64): a DataError
    ],
)
def test_a_reported_string_that_does_not_fit_is_a_located_400(agent, caplog, uuid, total, where, says):
    """The report's own strings are bounded like its numbers: a UUID with a bidirectional override
    (or any character ``core.validators`` refuses in names) or longer than its column is a 400
    naming the GPU's field; nothing is written."""
    with caplog.at_level(logging.INFO):
        r = agent.post("/api/pools/agent/", {"host": "host001", "nvidia_smi_xml": _xml([uuid], total)},
                       format="json")  # fmt: skip
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "nvidia_smi_xml" and r.json()["where"] == where, r.json()
    assert says in r.json()["detail"] and "\u202e" not in r.json()["detail"]
    assert not Gpu.objects.exists() and not AgentBinding.objects.exists() and not _tracebacks(caplog)


def test_the_host_agent_group_is_created_by_migrate(db):
    """The README tells an admin to add agent accounts to "Host agent": ``migrate`` creates it
    (pools 0008; it had to be made by hand). The migration's own function is run here, as the test
    database's migrations may have been flushed by a transactional test."""
    import importlib

    from django.apps import apps

    Group.objects.filter(name=AGENT_GROUP).delete()
    migration = importlib.import_module("pools.migrations.0008_host_agent_group")
    assert migration.GROUP == AGENT_GROUP
    migration.create_group(apps, None)
    migration.create_group(apps, None)  # idempotent
    assert Group.objects.filter(name=AGENT_GROUP).count() == 1
