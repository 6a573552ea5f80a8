"""Vendor and device name lists (pure functions, no Django): the IEEE OUI list and ``pci.ids``.

* IEEE MA-L assignments (Debian ``ieee-data``: ``/usr/share/ieee-data/oui.txt``, or ``oui.csv``):
  the 24-bit OUI → organisation name. IBTA NodeInfo ``VendorID`` is this IEEE OUI (IBTA Vol 1
  14.2.5.3: "IEEE assigned Organizationally Unique Identifier"), e.g. ``0x0002c9`` Mellanox.
* ``pci.ids`` (Debian ``pci.ids``/``hwdata``: ``/usr/share/misc/pci.ids``; format in its header:
  ``vendor  name``, ``<TAB>device  name``, ``<TAB><TAB>subvendor subdevice  name``, then ``C`` class
  sections): PCI vendor id → name and (vendor, device) → name. NodeInfo ``DeviceID`` of the
  Mellanox/NVIDIA HCAs and switches is the PCI device id of that part (``0x101b`` ConnectX-6,
  ``0xd2f0`` Quantum), listed under the PCI vendor of the same organisation.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

_OUI_TXT = re.compile(r"^\s*([0-9A-Fa-f]{2})-([0-9A-Fa-f]{2})-([0-9A-Fa-f]{2})\s+\(hex\)\s+(.*?)\s*$")
_PCI_VENDOR = re.compile(r"^([0-9a-fA-F]{4})\s+(.*?)\s*$")
_PCI_DEVICE = re.compile(r"^\t([0-9a-fA-F]{4})\s+(.*?)\s*$")


def parse_oui_txt(lines: Iterable[str]) -> dict[int, str]:
    """IEEE ``oui.txt`` lines → ``{oui (24-bit int): organisation}`` from the ``XX-XX-XX (hex)``
    lines (the ``(base 16)`` and address lines repeat or add nothing a name needs). Unrecognised
    lines are skipped: the file has a free-form header."""
    out: dict[int, str] = {}
    for line in lines:
        m = _OUI_TXT.match(line)
        if m and m.group(4):
            out[int(m.group(1) + m.group(2) + m.group(3), 16)] = m.group(4)
    return out


def parse_oui_csv(text: str) -> dict[int, str]:
    """IEEE ``oui.csv`` text (``Registry,Assignment,Organization Name,Organization Address``) →
    ``{oui: organisation}``; rows whose Assignment is not 6 hex digits are skipped."""
    out: dict[int, str] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 3 and re.fullmatch(r"[0-9A-Fa-f]{6}", row[1].strip()):
            out[int(row[1], 16)] = row[2].strip()
    return out


@dataclass
class PciIds:
    """What :func:`parse_pci_ids` read: ``vendors`` ``{vendor id: name}``, ``devices``
    ``{(vendor id, device id): name}`` (16-bit ints)."""

    vendors: dict[int, str] = field(default_factory=dict)
    devices: dict[tuple[int, int], str] = field(default_factory=dict)


def parse_pci_ids(lines: Iterable[str]) -> PciIds:
    """``pci.ids`` lines → :class:`PciIds` (vendors and their devices; subsystems and the ``C``
    device-class sections at the end are not names of parts and are skipped; comments are ``#``)."""
    out = PciIds()
    vendor: int | None = None
    for line in lines:
        line = line.rstrip("\r\n")
        if not line or line.startswith("#"):
            continue
        if line.startswith("C "):  # device classes: no more vendors after this
            break
        if line.startswith("\t\t"):
            continue
        if (m := _PCI_DEVICE.match(line)) and vendor is not None:
            out.devices[(vendor, int(m.group(1), 16))] = m.group(2)
        elif m := _PCI_VENDOR.match(line):
            vendor = int(m.group(1), 16)
            out.vendors[vendor] = m.group(2)
    return out


_SUFFIXES = re.compile(
    r"[\s,.]+(inc|ltd|llc|corp|corporation|co|limited|gmbh|ag|sa|technologies|technology|tech)\b\.?",
    re.IGNORECASE,
)


def org_key(name: str) -> str:
    """The comparable core of an organisation name: lower case, legal-form and ``Technologies``
    suffixes dropped (``"Mellanox Technologies, Inc."`` and ``"Mellanox Technologies"`` →
    ``"mellanox"``); how an OUI's organisation is matched to its PCI vendor entry."""
    key = _SUFFIXES.sub(" ", " " + name.lower() + " ")
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", key).split())
