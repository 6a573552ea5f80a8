"""The ports table (``/ports/``, its CSV, ``telemetry.porttable``): filters, sorting, server-side
pagination at a fixed number of queries, the streamed CSV, and 400s naming a bad parameter."""

from __future__ import annotations

import csv
import io

import pytest

from fabric.models import Port
from fabric.services.ingest import import_topology_text
from telemetry.models import PortCounters
from telemetry.porttable import BadParam, PortTableQuery, fabric_norm, port_table
from tests.support.topologies import BASE

pytestmark = [pytest.mark.django_db, pytest.mark.backend]  # backend: query counts of the port table

#: BASE with host002's cable at 4x EDR (100 Gb/s) instead of HDR: the one link below the norm
SLOW = BASE.replace(
    '[1] "h3"[1] # "host002 mlx5_0" lid 12 4xHDR', '[1] "h3"[1] # "host002 mlx5_0" lid 12 4xEDR'
).replace(
    '[1] "leaf2"[1] # lid 12 lmc 0 "leaf-2" lid 3 4xHDR', '[1] "leaf2"[1] # lid 12 lmc 0 "leaf-2" lid 3 4xEDR'
)


@pytest.fixture
def fabric():
    discovery = import_topology_text("t", SLOW, filename="t.txt")
    fabric = discovery.fabric
    ports = {
        (p.node.name, p.port_num): p for p in Port.objects.filter(node__fabric=fabric).select_related("node")
    }
    PortCounters.objects.create(
        port=ports[("leaf-1", 7)], xmit_bytes_per_s=5e9, rcv_bytes_per_s=1e9, utilisation=0.2, congestion=0.7
    )
    PortCounters.objects.create(
        port=ports[("leaf-2", 1)],
        symbol_errors=3,
        link_downed=1,
        error_deltas={"symbol_errors": 2},
        congestion=0.1,
    )
    PortCounters.objects.create(port=ports[("host001 mlx5_0", 1)], stale=True, stale_reason="MAD timeout")
    return fabric


def _names(fabric, **params):
    return [(p.node.name, p.port_num) for p in port_table(fabric, PortTableQuery.from_params(params))]


def test_norm_is_the_most_common_active_linked_rate(fabric):
    norm = fabric_norm(fabric)
    assert (norm.width, norm.speed, norm.rate_gbps, norm.ports, norm.total) == (
        "4x",
        "HDR",
        200.0,
        6,
        8,
    )  # spine-1 lines give no width


def test_filters(fabric):
    assert (
        len(_names(fabric)) == 10
    )  # linked ports only in BASE (switch port 0 is not listed by ibnetdiscover)
    assert set(_names(fabric, below="1")) == {("leaf-2", 1), ("host002 mlx5_0", 1)}
    assert _names(fabric, errors="1") == [("leaf-2", 1)]
    assert _names(fabric, errors="new") == [("leaf-2", 1)]
    assert _names(fabric, congested="1") == [("leaf-1", 7)]
    assert set(_names(fabric, congested="1", congestion_min="0.05")) == {("leaf-1", 7), ("leaf-2", 1)}
    assert _names(fabric, stale="1") == [("host001 mlx5_0", 1)]
    assert set(_names(fabric, tier="spine")) == {("spine-1", 1), ("spine-1", 2)}
    assert len(_names(fabric, type="ca")) == 3
    assert _names(fabric, node="LEAF-2", state="active") == [("leaf-2", 1), ("leaf-2", 7)]
    assert _names(fabric, state="down") == []


def test_sorting_nulls_last_both_ways(fabric):
    assert _names(fabric, sort="-congestion")[:2] == [("leaf-1", 7), ("leaf-2", 1)]
    assert _names(fabric, sort="congestion")[:2] == [("leaf-2", 1), ("leaf-1", 7)]
    assert _names(fabric, sort="-errors")[0] == ("leaf-2", 1)
    peers = [p.peer_name for p in port_table(fabric, PortTableQuery.from_params({"sort": "peer"}))]
    assert peers == sorted(peers)


@pytest.mark.parametrize(
    "params, param",
    [
        ({"state": "upish"}, "state"),
        ({"sort": "colour"}, "sort"),
        ({"errors": "2"}, "errors"),
        ({"congestion_min": "2"}, "congestion_min"),
        ({"tier": "x"}, "tier"),
        ({"node": "leaf\x00"}, "node"),
    ],
)
def test_bad_params_name_the_parameter(params, param):
    with pytest.raises(BadParam) as exc:
        PortTableQuery.from_params(params)
    assert exc.value.param == param


def test_page_paginates_and_costs_fixed_queries(fabric, viewer, django_assert_max_num_queries):
    with django_assert_max_num_queries(12):
        html = viewer.get(f"/ports/?fabric={fabric.pk}&per_page=4&sort=-congestion").content.decode()
    assert "page 1 of 3" in html and "MAD timeout" in html
    assert html.index("leaf-1") < html.index("leaf-2")
    response = viewer.get(f"/ports/?fabric={fabric.pk}&per_page=4&page=3")
    assert response.status_code == 200 and response.context["rows"].__len__() == 2


def test_page_bad_param_is_400_with_reason(fabric, viewer):
    response = viewer.get(f"/ports/?fabric={fabric.pk}&state=upish")
    assert response.status_code == 400
    assert "state: &#x27;upish&#x27; is not one of" in response.content.decode()
    assert viewer.get("/ports/?fabric=999999").status_code == 404


def test_a_nul_in_the_node_filter_is_a_400_naming_it(fabric, viewer):
    """PostgreSQL refuses a NUL in a text parameter (DataError: a 500 on the page, a download cut
    short after its 200 for the CSV); every form of the table refuses it first."""
    for url in ("/ports/", "/ports/csv/", "/api/fabric/port-table/"):
        response = viewer.get(url, {"fabric": fabric.pk, "node": "leaf\x00-1"})
        assert response.status_code == 400 and "node" in response.content.decode(), url


def test_csv_streams_the_whole_filtered_table(fabric, viewer):
    response = viewer.get(f"/ports/csv/?fabric={fabric.pk}&below=1")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {(r["node"], r["port"]) for r in rows} == {("leaf-2", "1"), ("host002 mlx5_0", "1")}
    (leaf,) = [r for r in rows if r["node"] == "leaf-2"]
    assert (leaf["speed"], leaf["rate_gbps"], leaf["error_total"]) == ("EDR", "100", "4")
    assert leaf["error_deltas"] == "symbol_errors=2" and leaf["peer"] == "host002 mlx5_0 [1]"
    assert viewer.get(f"/ports/csv/?fabric={fabric.pk}&sort=x").status_code == 400


def test_page_cost_does_not_grow_with_rows(
    fabric, viewer, django_assert_num_queries, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        viewer.get(f"/ports/?fabric={fabric.pk}&per_page=2")
    with CaptureQueriesContext(connection) as large:
        viewer.get(f"/ports/?fabric={fabric.pk}&per_page=10")
    assert len(small) == len(large)


def test_api_same_filters_paginated(fabric, viewer, anonymous):
    data = viewer.get(f"/api/fabric/port-table/?fabric={fabric.pk}&below=1&sort=-errors&limit=1").json()
    assert data["count"] == 2 and data["norm"] == {"width": "4x", "speed": "HDR", "rate_gbps": 200.0}
    (row,) = data["results"]
    assert (row["node"], row["port"], row["error_total"], row["below"]) == ("leaf-2", 1, 4, True)
    assert data["next"] and "offset=1" in data["next"]
    bad = viewer.get(f"/api/fabric/port-table/?fabric={fabric.pk}&sort=colour")
    assert bad.status_code == 400 and "sort" in bad.json()
    assert viewer.get("/api/fabric/port-table/").status_code == 400
    assert anonymous.get(f"/api/fabric/port-table/?fabric={fabric.pk}").status_code in (401, 403)


def test_port_page_shows_the_raw_counters_beside_the_charts(fabric, viewer):
    port = Port.objects.get(node__fabric=fabric, node__name="leaf-2", port_num=1)
    html = viewer.get(f"/fabric/ports/{port.pk}/").content.decode()
    table = html[html.index('id="port-counters-table"') : html.index('id="port-charts"')]
    assert '<tr data-counter="symbol_errors" class="error"><td>SymbolErrorCounter</td><td>3' in table
    assert "+2" in table and "LinkDownedCounter" in table
    never = Port.objects.get(node__fabric=fabric, node__name="spine-1", port_num=1)
    assert "Not swept yet." in viewer.get(f"/fabric/ports/{never.pk}/").content.decode()


def test_csv_cells_a_spreadsheet_would_run_are_quoted(fabric, viewer):
    """A NodeDescription is set by the host: one that starts like a formula is exported as text."""
    from fabric.models import Node

    Node.objects.filter(fabric=fabric, name="leaf-2").update(name="=HYPERLINK(1)")
    response = viewer.get(f"/ports/csv/?fabric={fabric.pk}&below=1")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert {r["node"] for r in rows} == {"'=HYPERLINK(1)", "host002 mlx5_0"}
    assert {r["error_total"] for r in rows} == {"4", "0"}
