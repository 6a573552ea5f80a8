"""Query parameters that only look like numbers ("²" passes ``str.isdigit()``) or overflow 64 bits
(SQLite's INTEGER, the embedded deployment): pages answer normally, the API with a 400 or an empty
page; never a 500."""

from __future__ import annotations

import pytest

from fabric.services.ingest import import_topology_text
from weft.testing.topologies import BASE

HUGE = "99999999999999999999"


@pytest.fixture(autouse=True)
def fabric(db):
    return import_topology_text("f", BASE, filename="base.topo").fabric


@pytest.mark.parametrize(
    "url",
    [
        "/?fabric=²",
        f"/?fabric={HUGE}",
        "/dashboard/summary.json?fabric=²",
        f"/dashboard/summary.json?fabric={HUGE}",
        "/fabric/changes/?fabric=²",
        f"/fabric/changes/?fabric={HUGE}",
        "/fabric/map/?fabric=²",
        "/fabric/map/?poll=²",
        "/api/fabric/nodes/?q=²",
        "/api/fabric/ports/?q=²",
    ],
)
def test_pages_and_searches_answer_200(viewer, url):
    assert viewer.get(url).status_code == 200


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
    assert viewer.get(url).status_code == 400


def test_changes_page_with_an_unknown_fabric_id_lists_nothing(viewer):
    body = viewer.get(f"/fabric/changes/?fabric={HUGE}").content.decode()
    assert viewer.get("/fabric/changes/?fabric=999999").status_code == 200
    assert "base.topo" not in body
    assert "base.topo" in viewer.get("/fabric/changes/").content.decode()


@pytest.mark.parametrize("value", ["abc", "²", "\x00", HUGE, ""])
def test_health_run_page_with_a_bad_fabric_is_a_404(operator, value):
    assert operator.post("/health/", {"fabric": value}).status_code == 404
