"""Vendor and device names of IB nodes, from the system's IEEE OUI list and ``pci.ids``.

``vendor_name(0x2c9)`` → ``"Mellanox Technologies, Inc."``; ``device_name(0x2c9, 0xd2f0)`` →
``"Quantum HDR (200Gbps) switch"``. The files are Debian's (``ieee-data``, ``pci.ids``; paths
``settings.WEFT_OUI_PATH``/``WEFT_PCI_IDS_PATH``), parsed once per process by
``fabric.parsers.ids`` (about 0.3 s) and cached; a missing or unreadable file gives hex
(``0x0002c9``/``0xd2f0``), never an error. A NodeInfo DeviceID is looked up under the PCI vendor
whose name matches the OUI's organisation (``fabric.parsers.ids.org_key``); no match → hex.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

from django.conf import settings

from .parsers.ids import PciIds, org_key, parse_oui_csv, parse_oui_txt, parse_pci_ids

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def _ouis(path: str) -> dict[int, str]:
    p = Path(path)
    try:
        if p.suffix == ".csv":
            return parse_oui_csv(p.read_text(encoding="utf-8", errors="replace"))
        with p.open(encoding="utf-8", errors="replace") as fh:
            return parse_oui_txt(fh)
    except OSError as exc:
        log.info("vendor names: %s unreadable (%s); showing hex vendor IDs", path, exc.strerror)
        return {}


@lru_cache(maxsize=4)
def _pci(path: str) -> tuple[PciIds, dict[str, int]]:
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as fh:
            ids = parse_pci_ids(fh)
    except OSError as exc:
        log.info("device names: %s unreadable (%s); showing hex device IDs", path, exc.strerror)
        ids = PciIds()
    by_org: dict[str, int] = {}
    for vid, name in ids.vendors.items():
        by_org.setdefault(org_key(name), vid)
    return ids, by_org


def vendor_hex(vendor_id: int | None) -> str:
    return "" if vendor_id is None else f"0x{vendor_id:06x}"


def device_hex(device_id: int | None) -> str:
    return "" if device_id is None else f"0x{device_id:04x}"


def vendor_name(vendor_id: int | None) -> str:
    """The organisation owning IEEE OUI ``vendor_id`` (NodeInfo VendorID), else its hex
    (``0x0002c9``); ``""`` for None."""
    if vendor_id is None:
        return ""
    return _ouis(settings.WEFT_OUI_PATH).get(vendor_id) or vendor_hex(vendor_id)


def device_name(vendor_id: int | None, device_id: int | None) -> str:
    """The part name of NodeInfo DeviceID ``device_id`` from ``pci.ids`` under the PCI vendor of
    OUI ``vendor_id``'s organisation, else its hex (``0xd2f0``); ``""`` for None."""
    if device_id is None:
        return ""
    org = _ouis(settings.WEFT_OUI_PATH).get(vendor_id) if vendor_id is not None else None
    if org:
        ids, by_org = _pci(settings.WEFT_PCI_IDS_PATH)
        pci_vendor = by_org.get(org_key(org))
        if pci_vendor is not None and (name := ids.devices.get((pci_vendor, device_id))):
            return name
    return device_hex(device_id)


def clear_cache() -> None:
    """Forget the parsed files (tests that point the settings elsewhere)."""
    _ouis.cache_clear()
    _pci.cache_clear()
