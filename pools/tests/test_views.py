"""Pool and host pages: tenant-scoped rows, used / borrowed / free bars, the pool's allocations,
hosts and history, a host's GPUs, MIG slices, HCAs with their leaves, and the dashboard's card.

The data is real: the ``rails`` topology (``tests.support.topologies.RAILS``: host001 and host002
each with mlx5_0 on rail0-leaf and mlx5_1 on rail1-leaf, LIDs 10-13), imported by the ingest and
seeded by the lab seed with 8 GPUs per host (GPU i on mlx5_<i mod 2>; host001's GPU7 in MIG mode
with a 3g.40gb, a 2g.20gb and two 1g.10gb slices), and allocations made through the allocation
service."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest
from django.utils import timezone

from fabric.models import Host, Node
from fabric.services.ingest import import_topology_text
from pools.lab import seed_lab_gpus
from pools.models import Gpu, Pool, Tenant, TenantMembership
from pools.services.allocation import AllocationRequest, allocate, pool_usage, release
from pools.views import bar, bar_segments, fitting_range
from tests.support.gpus import make_gpu_fabric
from tests.support.topologies import RAILS


def test_bar_segments():
    b = bar({"gpus": 6, "borrowed_gpus": 2, "free_gpus": 100}, quota=10)
    assert [(s["name"], s["x"], s["width"]) for s in b["segments"]] == [
        ("used", 0.0, 120.0),
        ("borrowed", 120.0, 60.0),
        ("free", 180.0, 120.0),
    ]
    assert bar({"gpus": 0, "borrowed_gpus": 0, "free_gpus": 0}, quota=None)["scale"] == 1
    # no quota: the scale is what the pool could hold now
    assert bar_segments(2, 0, 6, None)["scale"] == 8
    # a quota lowered below what is held: nothing free, the scale is what is held
    low = bar_segments(5, 1, 9, 3)
    assert (low["free"], low["scale"], low["segments"][-1]["width"]) == (0, 5, 0.0)
    # borrowed flags never show more than is held
    assert bar_segments(1, 3, 0, None)["borrowed"] == 1


def test_pool_list_scoped_with_bars(users, client_for):
    make_gpu_fabric("g", hosts=1, per_host=8)
    mine, theirs = Tenant.objects.create(name="mine"), Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users["viewer"])
    p = Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=6, guaranteed_gpus=2)
    Pool.objects.create(name="p-theirs", tenant=theirs)
    allocate(p.pk, AllocationRequest(count=3))
    html = client_for("viewer").get("/pools/").content.decode()
    assert "p-mine" in html and "p-theirs" not in html
    row = re.search(r'data-pool="p-mine" data-used="(\d+)" data-borrowed="(\d+)" data-free="(\d+)"', html)
    assert row.groups() == ("3", "1", "3")  # 3 held, 1 above the guarantee of 2, 3 more within quota 6
    # in words: the borrowed GPUs are among the used ones (issue 26 §4: "64 used · 64 borrowed")
    words = " ".join(re.search(r'<span class="usage-words"[^>]*>(.*?)</span>', html, re.S)[1].split())
    assert words == "3 GPUs used, 1 of them borrowed (above the guarantee of 2: reclaimable) · 3 free"
    scavenger = Pool.objects.create(name="p-fill", tenant=mine, guaranteed_gpus=0)
    allocate(scavenger.pk, AllocationRequest(count=2))
    html = client_for("viewer").get("/pools/").content.decode()
    fill = html[html.index('data-pool="p-fill"') :]
    words = " ".join(re.search(r'<span class="usage-words"[^>]*>(.*?)</span>', fill, re.S)[1].split())
    assert words.startswith("2 GPUs used, all borrowed (above the guarantee of 0: reclaimable) · ")
    assert f'href="/pools/{p.pk}/"' in html
    admin_html = client_for("admin").get("/pools/").content.decode()
    assert "p-theirs" in admin_html


@pytest.fixture
def lab(users):
    """The seeded rails fabric, tenants ``mine`` (the viewer is a member) and ``theirs``, pools
    and allocations (see the module docstring); returns names → objects and the times used."""
    fabric = import_topology_text("rails", RAILS, filename="rails.net").fabric
    seed_lab_gpus(fabric, 8, mig_every=2)
    mine, theirs = Tenant.objects.create(name="mine"), Tenant.objects.create(name="theirs")
    TenantMembership.objects.create(tenant=mine, user=users["viewer"])
    p_mine = Pool.objects.create(name="p-mine", tenant=mine, quota_gpus=6, guaranteed_gpus=2)
    p_theirs = Pool.objects.create(name="p-theirs", tenant=theirs)
    shared = Pool.objects.create(name="shared")
    gpus = {(g.host.name, g.index): g.pk for g in Gpu.objects.select_related("host")}
    now = timezone.now()
    early = allocate(p_mine.pk, AllocationRequest(count=1, gpu_ids=[gpus["host001", 0]], job="warmup"),
                     now=now - timedelta(hours=5))  # fmt: skip
    release(early.pk, now=now - timedelta(hours=4))
    train = allocate(p_mine.pk, AllocationRequest(count=3, gpu_ids=[gpus["host001", i] for i in (0, 1, 2)],
                     job="train-a"), now=now - timedelta(hours=3))  # fmt: skip
    mig = allocate(p_mine.pk, AllocationRequest(kind="mig", count=1, mig_profile="1g.10gb", job="notebook"),
                   now=now - timedelta(hours=2))  # fmt: skip
    allocate(
        p_theirs.pk,
        AllocationRequest(count=2, gpu_ids=[gpus["host002", 0], gpus["host002", 1]], job="theirs-job"),
    )
    allocate(
        shared.pk,
        AllocationRequest(count=1, gpu_ids=[gpus["host002", 2]], job="shared-theirs", tenant_id=theirs.pk),
    )
    allocate(
        shared.pk,
        AllocationRequest(count=1, gpu_ids=[gpus["host002", 3]], job="shared-mine", tenant_id=mine.pk),
    )
    return {"fabric": fabric, "p_mine": p_mine, "p_theirs": p_theirs, "shared": shared, "now": now,
            "early": early, "train": train, "mig": mig,
            "host001": Host.objects.get(name="host001"), "host002": Host.objects.get(name="host002")}  # fmt: skip


def _page(client, url: str):
    resp = client.get(url)
    assert resp.status_code == 200, (url, resp.status_code)
    return resp, resp.content.decode()


def _rows(html: str, table_id: str) -> list[str]:
    body = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr data-[^>]*>.*?</tr>", body, flags=re.S)


def test_pool_page_bars_allocations_hosts_and_map(lab, client_for):
    p = lab["p_mine"]
    resp, html = _page(client_for("viewer"), f"/pools/{p.pk}/")
    usage = re.search(r'id="pool-usage" data-used="(\d+)" data-borrowed="(\d+)" data-free="(\d+)" '
                      r'data-slices="(\d+)" data-free-slices="(\d+)"', html)  # fmt: skip
    # 3 GPUs held, 1 above the guarantee of 2; 16 GPUs - 1 MIG GPU - 7 held = 8 free, 3 within the
    # quota of 6; 1 slice held (no slice guarantee: borrowed), 3 slices of host001's GPU7 free
    assert usage.groups() == ("3", "1", "3", "1", "3")
    assert pool_usage(p.pk) == {"gpus": 3, "slices": 1, "borrowed_gpus": 1, "borrowed_slices": 1}
    active = _rows(html, "active-allocations")
    assert [re.search(r'data-allocation="(\d+)"', r).group(1) for r in active] == [
        str(lab["mig"].pk), str(lab["train"].pk)]  # fmt: skip
    train_row = next(r for r in active if f'data-allocation="{lab["train"].pk}"' in r)
    assert "host001</a>: GPU0, GPU1, GPU2" in train_row and "borrowed" in train_row
    assert "GPU7 MIG 1g.10gb" in active[0]
    ended = _rows(html, "ended-allocations")
    assert len(ended) == 1 and f'data-allocation="{lab["early"].pk}"' in ended[0] and "warmup" in ended[0]
    # its hosts: host001 only, its two CAs marked on the map of the base fabric
    assert resp.context["hosts"] == [lab["host001"]]
    cas = sorted(Node.objects.filter(host=lab["host001"]).values_list("node_guid", flat=True))
    assert len(cas) == 2
    assert f'data-highlight="{" ".join(cas)}"' in html
    assert f'data-map-url="/api/fabric/fabrics/{lab["fabric"].pk}/map/"' in html
    assert 'data-highlight-label="HCAs of p-mine on 1 host"' in html
    link = unescape(re.search(r'id="pool-map-link" href="([^"]+)"', html).group(1))
    assert link == f"/fabric/map/?fabric={lab['fabric'].pk}&highlight={'%2C'.join(cas)}"


def test_pool_page_history_from_allocation_rows(lab, client_for):
    resp, html = _page(client_for("viewer"), f"/pools/{lab['p_mine'].pk}/?range=7d")
    h, now = resp.context["history"], lab["now"]
    at = [(now - timedelta(hours=n)).timestamp() for n in (5, 4, 3, 2)]
    assert h["t"][1:5] == at
    assert h["gpus"] == [0, 1, 0, 3, 3, 3]  # at since, -5 h, -4 h, -3 h, -2 h (a slice), now
    assert h["borrowed_gpus"] == [0, 0, 0, 1, 1, 1]
    assert h["slices"] == [0, 0, 0, 0, 1, 1]
    assert h["t"][-1] - h["t"][0] == pytest.approx(7 * 86400)
    assert (h["quota"], h["guaranteed"], h["range"]) == (6, 2, "7d")
    assert 'id="pool-history-data"' in html and 'id="pool-history"' in html
    # a day's range starts after the first allocation ended... and -5 h is inside it
    day = _page(client_for("viewer"), f"/pools/{lab['p_mine'].pk}/?range=1d")[0].context["history"]
    assert day["range"] == "1d" and day["gpus"] == [0, 1, 0, 3, 3, 3]
    assert day["t"][-1] - day["t"][0] == pytest.approx(86400)
    # without a range the page opens on the shortest one covering the pool's history: its first
    # allocation started 5 h ago (the pool itself was made now), so a day, with the choices kept
    resp, html = _page(client_for("viewer"), f"/pools/{lab['p_mine'].pk}/")
    assert resp.context["history_range"] == "1d" and resp.context["history"]["gpus"] == [0, 1, 0, 3, 3, 3]
    assert re.findall(r'<a class="range( active)?" href="\?range=(\w+)">', html) == [
        ("", "1h"), (" active", "1d"), ("", "7d"), ("", "30d")]  # fmt: skip


def test_fitting_range_is_the_shortest_covering_the_history():
    assert fitting_range(timedelta(minutes=3)) == "1h"
    assert fitting_range(timedelta(hours=1)) == "1h"
    assert fitting_range(timedelta(hours=1, seconds=1)) == "1d"
    assert fitting_range(timedelta(days=3)) == "7d"
    assert fitting_range(timedelta(days=400)) == "30d"  # older than every range: the longest


def test_a_fresh_pool_opens_its_history_on_the_shortest_range(lab, client_for):
    """A pool made minutes ago with an allocation of a minute ago opens on 1h (not 7d of nothing);
    its range links still switch to the others."""
    mine = Tenant.objects.get(name="mine")
    fresh = Pool.objects.create(name="fresh", tenant=mine)
    Pool.objects.filter(pk=fresh.pk).update(created=timezone.now() - timedelta(minutes=4))
    free = Gpu.objects.filter(host__name="host001", index__in=(4, 5)).values_list("pk", flat=True)
    allocate(fresh.pk, AllocationRequest(count=2, gpu_ids=list(free), job="new"),
             now=timezone.now() - timedelta(minutes=1))  # fmt: skip
    resp, html = _page(client_for("viewer"), f"/pools/{fresh.pk}/")
    h = resp.context["history"]
    assert (h["range"], resp.context["history_range"]) == ("1h", "1h")
    assert h["t"][-1] - h["t"][0] == pytest.approx(3600) and h["gpus"] == [0, 2, 2]
    assert '<a class="range active" href="?range=1h">1h</a>' in html
    week = _page(client_for("viewer"), f"/pools/{fresh.pk}/?range=7d")[0].context["history"]
    assert week["range"] == "7d" and week["t"][-1] - week["t"][0] == pytest.approx(7 * 86400)


def test_shared_pool_page_shows_only_my_tenants_allocations(lab, client_for):
    url = f"/pools/{lab['shared'].pk}/"
    resp, html = _page(client_for("viewer"), url)
    rows = _rows(html, "active-allocations")
    assert len(rows) == 1 and "shared-mine" in rows[0] and "shared-theirs" not in html
    assert 'data-used="2"' in html  # the pool's bar counts every tenant's GPUs, as the pool list does
    assert resp.context["hosts"] == [lab["host002"]]
    admin_html = _page(client_for("admin"), url)[1]
    assert len(_rows(admin_html, "active-allocations")) == 2 and "shared-theirs" in admin_html


def test_another_tenants_pool_is_404_and_anonymous_signs_in(lab, client_for, anonymous):
    url = f"/pools/{lab['p_theirs'].pk}/"
    assert client_for("viewer").get(url).status_code == 404
    assert client_for("admin").get(url).status_code == 200
    assert client_for("viewer").get("/pools/999999/").status_code == 404
    for page in (url, "/pools/", f"/pools/hosts/{lab['host001'].pk}/", "/pools/hosts/"):
        resp = anonymous.get(page)
        assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/"), page


def test_host_page_gpus_slices_hcas_and_rails(lab, client_for):
    host = lab["host001"]
    resp, html = _page(client_for("viewer"), f"/pools/hosts/{host.pk}/")
    gpus = _rows(html, "gpu-table")
    assert len(gpus) == 8
    gpu0 = gpus[0]
    assert "NVIDIA H100 80GB HBM3" in gpu0 and "81559 MiB" in gpu0 and "Healthy" in gpu0
    assert '>host001 mlx5_0</a> <span class="muted">PIX</span>' in gpu0
    assert ">host001 mlx5_1</a>" in gpus[1]
    assert 'data-state="allocated"' in gpu0 and f"p-mine</a> #{lab['train'].pk}" in gpu0
    assert "Enabled" in gpus[7] and "Disabled" in gpus[6]
    # the MIG-mode GPU is shown by its slices, held by the slice's allocation, and not free
    assert "MIG: 1 of 4 slices allocated" in gpus[7] and f"p-mine</a> #{lab['mig'].pk}" in gpus[7]
    assert resp.context["gpu_counts"] == {"allocated": 3, "free": 4, "mig": 1}
    listed = _page(client_for("viewer"), "/pools/hosts/?q=host001")[1]
    assert 'data-host="host001" data-gpus="8" data-free="4"' in listed
    slices = _rows(html, "mig-table")
    assert [re.search(r'data-profile="([^"]*)"', r).group(1) for r in slices] == [
        "3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]  # fmt: skip
    assert sum('data-state="allocated"' in r for r in slices) == 1
    assert re.search(r"<td>1g.10gb</td><td>9</td><td>0</td>\s*<td>6:1</td>\s*<td>9984 MiB</td>", html)
    # HCAs: each port's GUID, LID, state and the leaf it is cabled to; GPUs on its rail
    hcas = resp.context["hcas"]
    assert [h["node"].name for h in hcas] == ["host001 mlx5_0", "host001 mlx5_1"]
    assert [[g.index for g in h["gpus"]] for h in hcas] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert [h["leaves"] for h in hcas] == [["rail0-leaf"], ["rail1-leaf"]]
    guids = ("0x0002c90300000101", "0x0002c90300000111")
    for h, rail, guid, lid in zip(hcas, (0, 1), guids, (10, 11), strict=True):
        block = html.split(f'data-guid="{h["node"].node_guid}"', 1)[1].split("</table>", 1)[0]
        assert f'<td class="mono">{guid}</td>' in block and f"<td>{lid}</td>" in block
        assert f">rail{rail}-leaf</a> port <a" in block and ">1</a></td>" in block  # host001 is port 1
        assert "Active" in block and "4x HDR" in block and "200 Gb/s" in block
    # allocations on the host: the viewer's tenant's two
    allocs = _rows(html, "host-allocations")
    assert sorted(re.search(r'data-allocation="(\d+)"', r).group(1) for r in allocs) == sorted(
        [str(lab["train"].pk), str(lab["mig"].pk)])  # fmt: skip
    cas = ",".join(h["node"].node_guid for h in hcas)
    assert f'href="/fabric/map/?fabric={lab["fabric"].pk}&amp;highlight={cas}"' in html


def test_host_page_hides_other_tenants_allocations(lab, client_for):
    url = f"/pools/hosts/{lab['host002'].pk}/"
    html = _page(client_for("viewer"), url)[1]
    allocs = _rows(html, "host-allocations")
    assert len(allocs) == 1 and "shared-mine" in allocs[0]
    assert "theirs-job" not in html and "shared-theirs" not in html and "p-theirs" not in html
    gpus = _rows(html, "gpu-table")
    assert "not one of your tenants" in gpus[0] and 'data-state="allocated"' in gpus[0]
    assert "shared</a> #" in gpus[3]
    admin_html = _page(client_for("admin"), url)[1]
    jobs = re.findall(r'<span class="mono">([\w-]+)</span>', admin_html.split('id="host-allocations"', 1)[1])
    assert sorted(jobs) == ["shared-mine", "shared-theirs", "theirs-job"]


def test_host_list_find_and_links_from_fabric_pages(lab, client_for):
    viewer, fabric, host = client_for("viewer"), lab["fabric"], lab["host001"]
    html = _page(viewer, f"/pools/hosts/?fabric={fabric.pk}&gpus=1")[1]
    rows = {m[0]: m[1:] for m in re.findall(r'data-host="([^"]+)" data-gpus="(\d+)" data-free="(\d+)"', html)}
    # host001: 8 GPUs, 3 held by train-a, GPU 7 in MIG mode (its slices are allocated, never it)
    assert rows == {"host001": ("8", "4"), "host002": ("8", "4")}
    assert "NVIDIA H100 80GB HBM3" in html
    assert _page(viewer, "/pools/hosts/?q=002")[1].count("data-host=") == 1
    resp = viewer.get(f"/pools/hosts/find/?fabric={fabric.pk}&name=host001")
    assert resp.status_code == 302 and resp["Location"] == f"/pools/hosts/{host.pk}/"
    assert viewer.get(f"/pools/hosts/find/?fabric={fabric.pk}&name=nope").status_code == 404
    assert viewer.get("/pools/hosts/find/?fabric=x&name=host001").status_code == 404
    node = Node.objects.get(name="host001 mlx5_1")
    assert (
        f'<a id="node-host" href="/pools/hosts/{host.pk}/">host001</a>'
        in _page(viewer, f"/fabric/nodes/{node.pk}/")[1]
    )
    assert f'href="/pools/hosts/?fabric={fabric.pk}">2 hosts</a>' in _page(viewer, f"/fabric/{fabric.pk}/")[1]
    # the map's panel links host names through the find page
    assert 'data-host-url="/pools/hosts/find/"' in _page(viewer, f"/fabric/map/?fabric={fabric.pk}")[1]


def test_map_page_highlight_parameter(lab, client_for):
    cas = sorted(Node.objects.filter(host=lab["host001"]).values_list("node_guid", flat=True))
    raw = f"{cas[1].upper().replace('0X', '')},not-a-guid {cas[0]},{cas[1]}"
    html = _page(client_for("viewer"), f"/fabric/map/?fabric={lab['fabric'].pk}&highlight={raw}")[1]
    assert f'data-highlight="{cas[1]} {cas[0]}"' in html
    assert "data-highlight" not in _page(client_for("viewer"), f"/fabric/map/?fabric={lab['fabric'].pk}")[1]


def test_dashboard_pool_usage_is_tenant_scoped(lab, client_for):
    html = _page(client_for("viewer"), "/")[1]
    card = html.split('id="pool-usage"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'data-pool="([^"]+)" data-used="(\d+)" data-borrowed="(\d+)" data-free="(\d+)"', card)
    # p-mine: 3 held (1 borrowed), 3 free within its quota; shared: 2 held, both borrowed (it
    # guarantees nothing), and no quota: the 8 free GPUs
    assert rows == [("p-mine", "3", "1", "3"), ("shared", "2", "2", "8")]
    admin = _page(client_for("admin"), "/")[1].split('id="pool-usage"', 1)[1].split("</table>", 1)[0]
    assert re.findall(r'data-pool="([^"]+)"', admin) == ["p-mine", "p-theirs", "shared"]
