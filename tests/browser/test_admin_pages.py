"""The pages that write what the API writes (issue 26 §4), in Chromium against a real server:

* a partition created from the partitions page with two hosts picked from the fabric's host list,
  applied by the lab's real OpenSM (ibsim + OpenSM, the server's in-process worker runs the apply
  the page requested) and seen on the ports' P_Key tables with the lab's own ``smpquery``;
* GPUs allocated from the pool page as the tenant's Operator, the result's hosts and
  ``CUDA_VISIBLE_DEVICES`` shown, a quota refusal shown as its message, then released;
* the topology downloaded from the fabric page: the file's name, media type and content.

Data goes through the real paths (``import_topology``, ``seed_gpus``, the REST API); the pages'
CSP is enforced (``browser_page`` fails on any violation).
"""

from __future__ import annotations

import pytest

from fabric.parsers.partitions import parse_smpquery_pkeys
from lab import netgen
from scheduler.exports import parse_topology_conf
from tests.support.map_pages import api_get, login
from tests.support.pool_pages import api, token
from tests.support.topologies import RAILS

pytestmark = pytest.mark.browser


@pytest.mark.lab
@pytest.mark.slow
def test_a_partition_of_two_hosts_made_on_its_page_is_applied_on_the_lab(
    lab_factory, weft_server_factory, browser_page
):
    lab = lab_factory(netgen.fat_tree_2level(2, 1, 4))  # 8 single-HCA hosts
    server = weft_server_factory(WEFT_DISCOVERY_INTERVAL_S="3600", WEFT_POLL_INTERVAL_S="3600")
    tok = token(server)
    fabric = api(server, tok, "POST", "/api/fabric/fabrics/", {"name": "lab", "tool_env": lab.tool_env})
    server.manage("discover", "--fabric", "lab")
    server.manage("partitions", "--fabric", "lab", "--set-path", str(lab.partitions_path),
                  "--set-pid-file", str(lab.sm_pid_file))  # fmt: skip
    hosts = api(server, tok, "GET", f"/api/fabric/hosts/?fabric={fabric['id']}&limit=100")["results"]
    hosts = sorted(hosts, key=lambda h: h["name"])
    assert len(hosts) == 8
    picked = [hosts[1], hosts[5]]

    page = browser_page
    login(page, server, "admin", next_url=f"/fabric/partitions/?fabric={fabric['id']}")
    with page.expect_navigation():
        page.click("#partition-add")
    page.fill("#id_name", "train")
    page.fill("#id_pkey", "0x0123")
    page.check("#id_ipoib")
    # the search narrows the list to the hosts whose name has the text
    page.fill("#host-search", picked[1]["name"])
    shown = page.eval_on_selector_all("#id_hosts option:not([hidden])", "os => os.map(o => o.text)")
    assert shown == [picked[1]["name"]]
    page.fill("#host-search", "")
    page.select_option("#id_hosts", [str(h["id"]) for h in picked])
    assert page.inner_text("#hosts-picked") == "2 hosts picked, 2 HCA ports"
    with page.expect_navigation():
        page.click("#partition-form button[type=submit]")
    assert "Partition train (0x0123) saved." in page.inner_text(".messages")
    # the page follows the apply the save requested and shows its end (the worker applies it)
    page.wait_for_selector("#apply-state[data-state=done], #apply-state[data-state=failed]", timeout=120000)
    assert page.get_attribute("#apply-state", "data-state") == "done", page.inner_text("#apply-card")
    assert page.inner_text("#applied-state").startswith("Applied and verified"), page.inner_text(
        "#applied-state"
    )

    part_id = int(page.url.split("/fabric/partitions/")[1].split("/")[0])
    members = api_get(page, server, f"/api/fabric/partitions/{part_id}/members/")
    guids = sorted(m["port_guid"] for m in members)
    assert len(guids) == 2 and all(m["membership"] == "full" for m in members)
    audit = api_get(page, server, "/api/accounts/audit/?object_type=fabric.partition&limit=50")["results"]
    assert {e["action"] for e in audit} >= {"partition.create", "partition.set_members"}
    # OpenSM put the PKey on the two hosts' ports only (read with the lab's own smpquery)
    ports = api_get(page, server, f"/api/fabric/ports/?fabric={fabric['id']}&type=ca&limit=200")["results"]
    others = sorted({p["port_guid"] for p in ports if p["port_guid"] and p["port_guid"] not in guids})
    assert len(others) >= 6
    for guid in guids:
        table = parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout)
        assert table.membership(0x0123) == "full", guid
    for guid in others[:2]:
        table = parse_smpquery_pkeys(lab.run(["smpquery", "pkeys", "-G", guid]).stdout)
        assert table.membership(0x0123) is None, guid


def _gpu_pool(server):
    """RAILS (host001, host002) with 8 GPUs each; tenant team-a whose Operator is ``operator``; its
    pool ``train`` (quota 3) on the fabric. Returns ``(token, pool)``."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / "rails.net"
        topo.write_text(RAILS)
        server.manage("import_topology", str(topo), "--fabric", "rails")
    server.manage("seed_gpus", "--fabric", "rails", "--per-host", "8")
    tok = token(server)
    users = api(server, tok, "GET", "/api/accounts/users/?limit=100")["results"]
    operator = next(u for u in users if u["username"] == "operator")
    tenant = api(server, tok, "POST", "/api/pools/tenants/",
                 {"name": "team-a", "members": [{"user": operator["id"], "role": "operator"}]})  # fmt: skip
    pool = api(
        server, tok, "POST", "/api/pools/pools/", {"name": "train", "tenant": tenant["id"], "quota_gpus": 3}
    )
    return tok, pool


def test_allocate_and_release_from_the_pool_page(weft_server, browser_page):
    server, page = weft_server, browser_page
    tok, pool = _gpu_pool(server)
    login(page, server, "operator", next_url=f"/pools/{pool['id']}/")
    # the form shows the inputs of the kind chosen (static/pools/allocate.js)
    memory = page.locator(".alloc-field[data-field=memory_mib]")
    assert memory.is_hidden() and page.locator(".alloc-field[data-field=count]").is_visible()
    page.select_option("#id_kind", "fraction")
    assert memory.is_visible() and page.locator(".alloc-field[data-field=count]").is_hidden()
    page.select_option("#id_kind", "gpu")
    page.fill("#id_count", "2")
    page.fill("#id_job", "train-42")
    with page.expect_navigation():
        page.click("#allocate-form button[type=submit]")
    result = page.locator("#allocation-result")
    alloc_id = result.get_attribute("data-allocation")
    alloc = api(server, tok, "GET", f"/api/pools/allocations/{alloc_id}/")
    assert alloc["state"] == "active" and alloc["count"] == 2 and alloc["job"] == "train-42"
    assert alloc["owner"] == "operator" and alloc["tenant"]["name"] == "team-a"
    for env in alloc["environment"]:  # the page shows what the API gives, host by host
        row = page.locator(f"#allocation-env tr[data-host='{env['host']}']")
        shown = row.locator(".env[data-name=CUDA_VISIBLE_DEVICES]").inner_text()
        assert shown == f"CUDA_VISIBLE_DEVICES={env['env']['CUDA_VISIBLE_DEVICES']}"
        assert len(env["env"]["CUDA_VISIBLE_DEVICES"].split(",")) == 2
    assert page.locator(f"#active-allocations tr[data-allocation='{alloc_id}']").count() == 1

    # over the quota (3): the service's refusal, readable, under the form; nothing allocated
    page.fill("#id_count", "2")
    with page.expect_navigation():
        page.click("#allocate-form button[type=submit]")
    assert page.inner_text("#allocate-errors") == "pool train: 2 gpus held + 2 asked > quota 3"
    assert api(server, tok, "GET", "/api/pools/allocations/?state=active")["count"] == 1

    with page.expect_navigation():
        page.click(f"button.release[data-allocation='{alloc_id}']")
    assert f"Allocation #{alloc_id} released: its GPUs are free." in page.inner_text(".messages")
    assert (
        page.locator(f"#ended-allocations tr[data-allocation='{alloc_id}'][data-state=released]").count() == 1
    )
    assert api(server, tok, "GET", f"/api/pools/allocations/{alloc_id}/")["state"] == "released"
    audit = api(server, tok, "GET", "/api/accounts/audit/?limit=100")["results"]
    assert {(e["action"], e["username"]) for e in audit} >= {
        ("allocation.create", "operator"), ("allocation.released", "operator")
    }  # fmt: skip


def test_topology_download_from_the_fabric_page(weft_server, browser_page, tmp_path):
    server, page = weft_server, browser_page
    topo = tmp_path / "rails.net"
    topo.write_text(RAILS)
    server.manage("import_topology", str(topo), "--fabric", "rails")
    tok = token(server)
    fabric = api(server, tok, "GET", "/api/fabric/fabrics/?name=rails")["results"][0]
    login(page, server, "viewer", next_url=f"/fabric/{fabric['id']}/")

    page.select_option("#export-format", "slurm-tree")
    with page.expect_download() as info:
        page.click("#export-download")
    download = info.value
    assert download.suggested_filename == "rails-topology.conf"
    text = open(download.path()).read()
    lines = parse_topology_conf(text)
    assert {h for c in lines for h in c.nodes or ()} == {"host001", "host002"}
    resp = page.request.get(download.url)
    assert resp.headers["content-type"] == "text/plain; charset=utf-8"

    page.select_option("#export-format", "volcano")
    with page.expect_download() as info:
        page.click("#export-download")
    assert info.value.suggested_filename == "rails-volcano-hypernodes.yaml"
    import yaml

    docs = [d for d in yaml.safe_load_all(open(info.value.path()).read()) if d]
    assert {d["kind"] for d in docs} == {"HyperNode"}
    assert "host001" in str(docs) and "host002" in str(docs)

    # a bad node list: back on the fabric page with the reason
    page.fill("#export-nodes", "host[1-")
    with page.expect_navigation():
        page.click("#export-download")
    assert page.url.endswith(f"/fabric/{fabric['id']}/#topology-export")
    assert "Export: the node list is not a host-list expression" in page.inner_text(".messages")
