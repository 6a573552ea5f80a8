"""The import page in Chromium: a real file imports; a cut file is refused with its line; a file
that would remove most of the stored fabric asks first, lists what would go, and imports once the
admin ticks "the file is the whole fabric"."""

from __future__ import annotations

import pytest

from tests.browser_support import login

pytestmark = pytest.mark.browser

HK3 = "ibnetdiscover/hk_topo3_quantum_hdr_2019.ibnetdiscover.txt"
UFM = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


def _upload(page, server, path, fabric: str, replace: bool = False) -> str:
    page.goto(server.url + "/fabric/import/")
    page.fill("#import-fabric", fabric)
    page.set_input_files("#import-file", str(path))
    if replace:
        page.check("#import-replace")
    page.click("#import-submit")
    page.wait_for_selector("#import-result[data-status]:not([hidden])", timeout=30000)
    return page.get_attribute("#import-result", "data-status")


def test_import_page_refuses_cut_files_and_asks_before_removing(
    weft_server, browser_page, realdata, tmp_path
):
    page = browser_page
    login(page, weft_server, "admin")
    assert _upload(page, weft_server, realdata / HK3, "hk") == "201"

    text = (realdata / HK3).read_text()
    cut = tmp_path / "hk3-cut.txt"
    cut.write_text(text[: text.rfind("\n\n", 0, len(text) // 2) + 2])
    assert _upload(page, weft_server, cut, "hk") == "400"
    assert "cut short" in page.inner_text("#import-error")
    assert page.get_attribute("#import-error", "data-line")

    assert _upload(page, weft_server, realdata / UFM, "hk") == "409"
    assert "would remove" in page.inner_text("#import-error")
    assert page.locator("#import-would-remove li").count() > 0
    assert _upload(page, weft_server, realdata / UFM, "hk", replace=True) == "201"
