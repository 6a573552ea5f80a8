"""The ports view and the topology compare report in Chromium, against one real server: the
ports table filters (below the fabric's norm), sorts and pages on the server, and its CSV link
downloads the filtered rows; an Admin sets the latest discovery as the reference (it matches),
then a cabling plan with a cable left out (it reports that cable as extra), and the JSON agrees."""

from __future__ import annotations

import csv
import io
import re

import pytest

from tests.browser_support import login

pytestmark = pytest.mark.browser

HK3 = "ibnetdiscover/hk_topo3_quantum_hdr_2019.ibnetdiscover.txt"
#: a cable of HK3 (both lines): switch S-98039b030096aa24 port 24 ↔ S-98039b030087675e port 39
CABLE = ('[24]\t"S-98039b030087675e"[39]', '[39]\t"S-98039b030096aa24"[24]')


def _fabric_id(page, server, name: str) -> int:
    fabrics = page.request.get(server.url + "/api/fabric/fabrics/").json()["results"]
    return next(f["id"] for f in fabrics if f["name"] == name)


def test_ports_view_filters_sorts_pages_and_exports_csv(weft_server, browser_page, realdata):
    server, page = weft_server, browser_page
    server.manage("import_topology", "--fabric", "hk", str(realdata / HK3))
    login(page, server, "viewer")
    fabric = _fabric_id(page, server, "hk")
    page.goto(f"{server.url}/ports/?fabric={fabric}")
    total = int(re.match(r"(\d+) ports", page.inner_text("#ports-count")).group(1))
    assert total > 1000 and page.locator("#ports-table tbody tr").count() == 100
    assert page.locator("#ports-next").count() == 1

    # below the fabric's norm (4x HDR): the two CAs' SDR cables, both ends
    page.check("#ports-below")
    page.click("#ports-apply")
    page.wait_for_url(re.compile(r"below=1"))
    assert "4x HDR" in page.inner_text("#ports-filter")
    rows = page.locator("#ports-table tbody tr")
    assert rows.count() == 4 and page.inner_text("#ports-count").startswith("4 ports")
    assert all("SDR" in t for t in page.locator("#ports-table td[data-col=rate]").all_inner_texts())
    # vendor/device names from Debian's ieee-data and pci.ids (bin/setup installs them), not hex
    devices = page.locator("#ports-table td[data-col=device]").all_inner_texts()
    assert any("Quantum" in d for d in devices), devices

    # sorted by node name descending on the server (the list is by node already: the header
    # link turns it round) and the filter kept
    page.click("#ports-table th >> text=Node")
    page.wait_for_url(re.compile(r"below=1.*sort=-node"))
    names = page.locator("#ports-table tbody tr td:first-child").all_inner_texts()
    assert names == sorted(names, reverse=True) and len(names) == 4

    # the CSV of the filtered table
    with page.expect_download() as info:
        page.click("#ports-csv")
    text = open(info.value.path(), encoding="utf-8").read()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 4 and {r["speed"] for r in rows} == {"SDR"}
    assert {r["node_type"] for r in rows} == {"ca", "switch"}

    # a bad parameter is a page that says which
    page.goto(f"{server.url}/ports/?fabric={fabric}&state=sideways")
    assert "state: 'sideways' is not one of" in page.inner_text("#ports-error")


def test_compare_report_after_setting_the_reference(weft_server, browser_page, realdata, tmp_path):
    server, page = weft_server, browser_page
    server.manage("import_topology", "--fabric", "hk", str(realdata / HK3))
    plan = tmp_path / "plan.txt"
    plan.write_text("\n".join(
        line for line in (realdata / HK3).read_text().splitlines() if not line.startswith(CABLE)
    ) + "\n")  # fmt: skip
    login(page, server, "admin")
    fabric = _fabric_id(page, server, "hk")
    page.goto(f"{server.url}/fabric/{fabric}/compare/")
    assert page.locator("#compare-none").count() == 1

    # the first reference replaces nothing: no box to tick
    assert page.locator("#compare-set-discovery input[name=confirm]").count() == 0
    page.click("#compare-set-discovery button")
    page.wait_for_selector("#compare-matches")

    page.set_input_files("#compare-file", str(plan))
    page.check("#compare-set-file input[name=confirm]")
    page.click("#compare-set-file button")
    page.wait_for_selector("#compare-extra_links")
    assert page.get_attribute("#compare-summary", "data-matches") == "0"
    assert page.inner_text("[data-count=extra_links]") == "1"
    row = page.inner_text("#compare-extra_links tbody tr")
    assert "[24]" in row and "[39]" in row, row
    assert "plan.txt" in page.inner_text("#compare-summary")
    report = page.request.get(server.url + page.get_attribute("#compare-json", "href")).json()
    assert report["counts"]["extra_links"] == 1 and not report["matches"]
