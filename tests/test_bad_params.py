"""Query parameters that only look like numbers ("²" passes ``str.isdigit()``) or overflow 64 bits
(SQLite's INTEGER, the embedded deployment): pages answer normally, the API with a 400 or an empty
page; never a 500."""

from __future__ import annotations

import pytest

from fabric.services.ingest import import_topology_text
from tests.support.topologies import BASE

HUGE = "99999999999999999999"


@pytest.fixture(autouse=True)
def fabric(db):
    return import_topology_text("f", BASE, filename="base.topo").fabric


@pytest.mark.parametrize(
    "url,expected",
    [
        ("/?fabric=²", "<title>Dashboard · Weft</title>"),
        (f"/?fabric={HUGE}", "<title>Dashboard · Weft</title>"),
        ("/dashboard/summary.json?fabric=²", '"name": "f"'),
        (f"/dashboard/summary.json?fabric={HUGE}", '"name": "f"'),
        ("/fabric/changes/?fabric=²", "<title>Topology changes · Weft</title>"),
        (f"/fabric/changes/?fabric={HUGE}", "<title>Topology changes · Weft</title>"),
        ("/fabric/map/?fabric=²", "No fabric “²”"),
        ("/fabric/map/?poll=²", "<title>Map · f · Weft</title>"),
        ("/api/fabric/nodes/?q=²", '"count":0,'),  # no node matches the search
        ("/api/fabric/ports/?q=²", '"results":['),
    ],
)
def test_pages_and_searches_answer_200(viewer, url, expected):
    resp = viewer.get(url)
    assert resp.status_code == 200
    assert expected in resp.content.decode()


@pytest.mark.parametrize(
    "url",
    [
        f"/api/fabric/nodes/?fabric={HUGE}",
        f"/api/fabric/nodes/?lid={HUGE}",
        f"/api/fabric/ports/?lid={HUGE}",
        f"/api/fabric/ports/?fabric={HUGE}",
        f"/api/fabric/ports/?node={HUGE}",
        f"/api/fabric/links/?lid={HUGE}",
        f"/api/fabric/links/?node={HUGE}",
        f"/api/fabric/links/?fabric={HUGE}",
        f"/api/fabric/discoveries/?fabric={HUGE}",
        f"/api/fabric/hosts/?fabric={HUGE}",
        f"/api/fabric/subnet-managers/?lid={HUGE}",
        f"/api/fabric/subnet-managers/?fabric={HUGE}",
    ],
)
def test_api_filters_out_of_range_are_a_400(viewer, url):
    resp = viewer.get(url)
    assert resp.status_code == 400
    param = url.split("?")[1].split("=")[0]
    assert list(resp.json()) == [param]  # the answer names the parameter at fault


def test_changes_page_with_an_unknown_fabric_id_lists_nothing(viewer):
    body = viewer.get(f"/fabric/changes/?fabric={HUGE}").content.decode()
    assert viewer.get("/fabric/changes/?fabric=999999").status_code == 200
    assert "base.topo" not in body
    assert "base.topo" in viewer.get("/fabric/changes/").content.decode()


@pytest.mark.parametrize("value", ["abc", "²", "\x00", HUGE, ""])
def test_health_run_page_with_a_bad_fabric_is_a_404(operator, value):
    from events.models import HealthReport

    assert operator.post("/health/", {"fabric": value}).status_code == 404
    assert not HealthReport.objects.exists()
