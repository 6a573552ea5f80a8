"""Vendor and device names: the pure parsers of the IEEE OUI list and pci.ids, the cached lookup,
and hex when the files are absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from fabric import vendors
from fabric.parsers.ids import org_key, parse_oui_csv, parse_oui_txt, parse_pci_ids

OUI_TXT = """OUI/MA-L                                 Organization
company_id                               Organization
                                         Address

00-02-C9   (hex)\t\tExample Fabrics, Inc.
0002C9     (base 16)\t\tExample Fabrics, Inc.
\t\t\t\t1 Road
\t\t\t\tTown  CA  90000

AB-CD-EF   (hex)\t\tOther Corp
ABCDEF     (base 16)\t\tOther Corp
"""

PCI_IDS = """#
#\tList of PCI ID's
#
1234  Example Fabrics
\td2f0  Switchy HDR switch
\t\t1234 0001  Switchy subsystem
\t101b  Cardy-6
5678  Other Corporation
\td2f0  Unrelated part
C 00  Unclassified device
\t00  Non-VGA unclassified device
"""


def test_parse_oui_txt_reads_hex_lines_only():
    assert parse_oui_txt(OUI_TXT.splitlines()) == {0x0002C9: "Example Fabrics, Inc.", 0xABCDEF: "Other Corp"}


def test_parse_oui_csv():
    text = 'Registry,Assignment,Organization Name,Organization Address\nMA-L,0002C9,"Example, Inc.",x\nMA-L,zz,Bad,y\n'
    assert parse_oui_csv(text) == {0x0002C9: "Example, Inc."}


def test_parse_pci_ids_vendors_devices_no_subsystems_or_classes():
    ids = parse_pci_ids(PCI_IDS.splitlines(keepends=True))
    assert ids.vendors == {0x1234: "Example Fabrics", 0x5678: "Other Corporation"}
    assert ids.devices == {
        (0x1234, 0xD2F0): "Switchy HDR switch",
        (0x1234, 0x101B): "Cardy-6",
        (0x5678, 0xD2F0): "Unrelated part",
    }


def test_org_key_matches_oui_and_pci_spellings():
    assert org_key("Mellanox Technologies, Inc.") == org_key("Mellanox Technologies") == "mellanox"
    assert org_key("Example Fabrics, Inc.") == org_key("Example Fabrics") == "example fabrics"
    assert org_key("NVIDIA Corporation") == "nvidia"


@pytest.fixture
def id_files(tmp_path, settings):
    (tmp_path / "oui.txt").write_text(OUI_TXT)
    (tmp_path / "pci.ids").write_text(PCI_IDS)
    settings.WEFT_OUI_PATH = str(tmp_path / "oui.txt")
    settings.WEFT_PCI_IDS_PATH = str(tmp_path / "pci.ids")
    vendors.clear_cache()
    yield tmp_path
    vendors.clear_cache()


def test_lookup_names_device_under_the_ouis_pci_vendor(id_files):
    assert vendors.vendor_name(0x2C9) == "Example Fabrics, Inc."
    assert vendors.device_name(0x2C9, 0xD2F0) == "Switchy HDR switch"
    assert vendors.device_name(0xABCDEF, 0xD2F0) == "Unrelated part"  # "Other Corp" = "Other Corporation"
    assert vendors.vendor_name(0x123456) == "0x123456"
    assert vendors.device_name(0x2C9, 0x9999) == "0x9999"
    assert vendors.vendor_name(None) == vendors.device_name(0x2C9, None) == ""


def test_absent_files_give_hex(tmp_path, settings):
    settings.WEFT_OUI_PATH = str(tmp_path / "none.txt")
    settings.WEFT_PCI_IDS_PATH = str(tmp_path / "none.ids")
    vendors.clear_cache()
    try:
        assert vendors.vendor_name(0x2C9) == "0x0002c9"
        assert vendors.device_name(0x2C9, 0xD2F0) == "0xd2f0"
    finally:
        vendors.clear_cache()


@pytest.mark.skipif(
    not (Path("/usr/share/ieee-data/oui.txt").exists() and Path("/usr/share/misc/pci.ids").exists()),
    reason="Debian's ieee-data and pci.ids packages are not installed (bin/setup installs them)",
)
def test_debian_files_name_mellanox_parts(settings):
    settings.WEFT_OUI_PATH = "/usr/share/ieee-data/oui.txt"
    settings.WEFT_PCI_IDS_PATH = "/usr/share/misc/pci.ids"
    vendors.clear_cache()
    assert "Mellanox" in vendors.vendor_name(0x0002C9)
    assert "Quantum" in vendors.device_name(0x0002C9, 0xD2F0)
    assert "ConnectX-6" in vendors.device_name(0x0002C9, 0x101B)


@pytest.mark.django_db
def test_node_page_shows_names(id_files, viewer):
    from fabric.models import Fabric, Node

    fabric = Fabric.objects.create(name="f")
    node = Node.objects.create(
        fabric=fabric, node_guid="0x0002c90300000001", node_type="switch", vendor_id=0x2C9, device_id=0xD2F0
    )
    html = viewer.get(node.get_absolute_url()).content.decode()
    assert "Example Fabrics, Inc." in html and "Switchy HDR switch" in html
