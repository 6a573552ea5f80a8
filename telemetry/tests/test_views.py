"""Heatmap page, snapshot and cell APIs, port-series API, and the producer's delta logic.

The fabric here is built with the ORM (two spines, two leaves, one CA) and the counters written
as a sweep would write them, so the expected cells follow from the rows the test wrote.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from fabric.choices import PortState
from fabric.models import Port
from telemetry import producer
from telemetry.models import Sweep, SweepStatus
from tests.support.telemetry import make_fabric, write_sweep

pytestmark = pytest.mark.backend  # the cache (Redis in production)


@pytest.fixture
def lab_fabric(db):
    cache.clear()
    return make_fabric()


def test_snapshot_rows_grouped_by_tier_and_cells_from_counters(users, lab_fabric):
    ports = lab_fabric["ports"]
    hot = ports[("leaf1", 1)]
    write_sweep(
        lab_fabric["fabric"],
        {
            hot: {
                "utilisation": 0.52349,
                "congestion": 0.8,
                "xmit_wait": 1000,
                "error_deltas": {"symbol_errors": 3},
            },
            ports[("spine1", 2)]: {"utilisation": 0.1, "congestion": 0.0, "error_deltas": {}},
            ports[("leaf2", 4)]: {"stale": True, "stale_reason": "timeout"},
        },
    )
    # a pulled cable: a port read by the sweep whose PortState is Down now is drawn down; a port
    # never read (no link ever) is not, whatever its state
    spine = ports[("spine1", 2)]
    never = ports[("spine2", 3)]
    Port.objects.filter(pk__in=[spine.pk, never.pk]).update(state=PortState.DOWN)
    client = APIClient()
    client.force_authenticate(users["viewer"])
    doc = client.get(f"/api/fabric/heatmap/{lab_fabric['fabric'].pk}/").json()
    assert [r["description"] for r in doc["rows"]] == ["spine1", "spine2", "leaf1", "leaf2"]
    assert doc["tiers"] == [{"tier": 2, "name": "spine", "rows": 2}, {"tier": 1, "name": "leaf", "rows": 2}]
    assert doc["columns"] == 4
    # Port 0 (switch management port) and the CA's port are not cells: 4 switches x 4 ports.
    assert len(doc["cells"]) == 16
    by_port = {c[0]: c for c in doc["cells"]}
    assert by_port[hot.pk] == [hot.pk, hot.node_id, 1, 0.523, 0.8, 1, 0, 0]
    assert by_port[spine.pk] == [spine.pk, spine.node_id, 2, 0.1, 0.0, 0, 0, 1]
    assert by_port[ports[("leaf2", 4)].pk][5:] == [0, 1, 0]
    # Never read: stale, no values.
    assert by_port[never.pk] == [never.pk, never.node_id, 3, None, None, 0, 1, 0]
    assert doc["sweep"]["status"] == "ok" and doc["poll_interval_s"] > 0


def test_cell_detail_has_raw_counters_and_remote_end(users, lab_fabric):
    ports = lab_fabric["ports"]
    port = ports[("leaf1", 3)]
    write_sweep(
        lab_fabric["fabric"],
        {
            port: {
                "xmit_data": 2500,
                "xmit_wait": 77,
                "xmit_bytes_per_s": 1e9,
                "error_deltas": {"rcv_errors": 2},
            }
        },
    )
    client = APIClient()
    client.force_authenticate(users["viewer"])
    doc = client.get(f"/api/fabric/heatmap/{lab_fabric['fabric'].pk}/cells/{port.pk}/").json()
    assert doc["remote"]["description"] == "host1 mlx5_0" and doc["remote"]["port_num"] == 1
    assert doc["counters"]["raw"]["xmit_data"] == 2500 and doc["counters"]["raw"]["xmit_wait"] == 77
    assert doc["counters"]["rates"]["xmit_bytes_per_s"] == 1e9
    assert doc["counters"]["error_deltas"] == {"rcv_errors": 2}
    # A port of another fabric is not reachable through this fabric's URL.
    other = make_fabric("other")
    resp = client.get(
        f"/api/fabric/heatmap/{lab_fabric['fabric'].pk}/cells/{other['ports'][('leaf1', 1)].pk}/"
    )
    assert resp.status_code == 404


def test_heatmap_api_and_page_need_login(users, lab_fabric):
    fid = lab_fabric["fabric"].pk
    anonymous = APIClient().get(f"/api/fabric/heatmap/{fid}/")
    assert (anonymous.status_code, anonymous.json()) == (
        401,
        {"detail": "Authentication credentials were not provided."},
    )
    resp = Client().get(f"/heatmap/{fid}/")
    assert resp.status_code == 302 and "/accounts/login/" in resp["Location"]
    client = Client()
    client.force_login(users["viewer"])
    page = client.get(f"/heatmap/{fid}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-ws-path="/ws/heatmap/{fid}/"' in html and "telemetry/heatmap.js" in html
    # One fabric: /heatmap/ goes straight to it; two: a list.
    assert client.get("/heatmap/")["Location"] == f"/heatmap/{fid}/"
    make_fabric("second")
    listing = client.get("/heatmap/")
    assert listing.status_code == 200 and b"second" in listing.content
    assert client.get("/heatmap/999999/").status_code == 404


def test_producer_full_then_delta_of_changed_cells(lab_fabric):
    fabric, ports = lab_fabric["fabric"], lab_fabric["ports"]
    a, b = ports[("leaf1", 1)], ports[("leaf2", 2)]
    s1 = write_sweep(
        fabric, {a: {"utilisation": 0.2, "congestion": 0.1}, b: {"utilisation": 0.3, "congestion": 0.0}}
    )
    first, notice = producer.build_delta(fabric.pk, s1.pk)
    assert first["full"] is True and len(first["cells"]) == 16 and notice is None
    assert first["sweep"] == s1.pk and first["interval_s"] > 0
    # Same rounded values (noise below 0.1 %): nothing to send; a real change: only that cell.
    s2 = write_sweep(fabric, {a: {"utilisation": 0.20004, "congestion": 0.1}, b: {"congestion": 0.45}})
    second, _ = producer.build_delta(fabric.pk, s2.pk)
    assert "full" not in second
    assert second["cells"] == [[b.pk, b.node_id, 2, 0.3, 0.45, 0, 0, 0]]
    assert second["interval_s"] == 1.0
    s3 = write_sweep(fabric, {a: {"error_deltas": {"link_downed": 1}}}, status=SweepStatus.FAILED)
    Sweep.objects.filter(pk=s3.pk).update(error="SM moved")
    third, notice = producer.build_delta(fabric.pk, s3.pk)
    assert [c[0] for c in third["cells"]] == [a.pk] and third["cells"][0][5] == 1
    assert notice == {"fabric": fabric.pk, "sweep": s3.pk, "at": third["at"], "reason": "SM moved"}
    # A sweep of another fabric is not this fabric's.
    assert producer.build_delta(fabric.pk + 1000, s3.pk) == (None, None)


def test_series_api_validates_range(users, lab_fabric):
    client = APIClient()
    client.force_authenticate(users["viewer"])
    port = lab_fabric["ports"][("leaf1", 1)]
    bad = client.get(f"/api/fabric/port-series/{port.pk}/", {"start": "yesterday-ish"})
    assert bad.status_code == 400 and "start" in bad.json()
    bad = client.get(f"/api/fabric/port-series/{port.pk}/", {"start": "-1h", "end": "-2h"})
    assert bad.status_code == 400
    assert bad.json() == {"start": "start must be before end"}
    bad = client.get(f"/api/fabric/port-series/{port.pk}/", {"resolution": "weekly"})
    assert bad.status_code == 400 and "resolution" in bad.json()
    missing = client.get("/api/fabric/port-series/99999999/")
    assert (missing.status_code, missing.json()) == (404, {"detail": "No Port matches the given query."})


def test_series_api_returns_stored_history(users, lab_fabric):
    import time

    from telemetry.models import CounterChunk
    from telemetry.services.history import build_chunks

    fabric, port = lab_fabric["fabric"], lab_fabric["ports"][("leaf1", 1)]
    t0 = int(time.time()) - 120
    chunks = []
    for i in range(3):
        # (xmit bytes/s, rcv bytes/s, PortXmitWait ticks/s, errors, flags) as the sweep stores them
        chunks += build_chunks(fabric.pk, t0 + 10 * i, [(port.pk, (1e9 * (i + 1), 5e8, 2e5, i, 0))])
    CounterChunk.objects.bulk_create(chunks)
    client = APIClient()
    client.force_authenticate(users["viewer"])
    doc = client.get(f"/api/fabric/port-series/{port.pk}/", {"start": "-10m", "end": "now"}).json()
    assert doc["t"] == [t0, t0 + 10, t0 + 20]
    assert doc["xmit_bytes_per_s"] == pytest.approx([1e9, 2e9, 3e9], rel=1e-3)
    # 4x HDR = 200 Gb/s = 25e9 bytes/s; congestion = 2e5 ticks/s x 1 µs tick.
    assert doc["utilisation"] == pytest.approx([0.04, 0.08, 0.12], rel=1e-3)
    assert doc["congestion"] == pytest.approx([0.2, 0.2, 0.2], rel=1e-3)
    assert doc["errors"] == [0, 1, 2]
    assert doc["port"]["description"] == "leaf1" and doc["resolution"] == "raw"
    # An ISO range before the samples is empty.
    early = client.get(
        f"/api/fabric/port-series/{port.pk}/",
        {"start": "2020-01-01T00:00:00Z", "end": "2020-01-01T01:00:00Z"},
    ).json()
    assert early["t"] == []
