"""Parsers of the SM tools' output: ``sminfo`` and ``saquery -s`` (pure: no Django import).

``sminfo(8)`` (infiniband-diags) queries SMInfo (IBTA Vol 1 14.2.5.13) of the SM at the local
port's MasterSMLID and prints one line::

    sminfo: sm lid 1 sm guid 0x2c90200259201, activity count 6881 priority 0 state 3 SMINFO_MASTER

``parse_sminfo`` also reads captures of several hosts (cexec/pdsh style separators such as
``--------- n01---------`` or ``host: sminfo: ...``) and lines a mail client hard-wrapped
before ``state``.
"""

from __future__ import annotations

import re

from .records import SM_STATES, SMRecord, TopologyParseError

_RECORD = re.compile(
    r"sminfo:\s+sm\s+lid\s+(?P<lid>\d+)\s+sm\s+guid\s+(?P<guid>(?:0x)?[0-9a-fA-F]{1,16}),\s*"
    r"activity\s+count\s+(?P<act>\d+)\s+priority\s+(?P<prio>\d+)\s+state\s+(?P<state>\d+)"
    r"(?:\s+(?P<name>SMINFO_\w+))?"
)
_SEPARATOR = re.compile(r"^-{3,}\s*(?P<host>[^-\s][^-]*?)\s*-{3,}\s*$")
_HOST_PREFIX = re.compile(r"^(?P<host>[\w.-]+):\s+(?=sminfo:)")


class SMInfoParseError(TopologyParseError):
    """Text that claims to be sminfo output but cannot be read; ``str()`` names ``source:line``."""


def parse_sminfo(text: str, source: str = "<sminfo>") -> list[SMRecord]:
    """Parse ``sminfo`` output (one or many records) into :class:`~fabric.parsers.records.SMRecord`
    rows, in text order (``lid`` None for LID 0).

    Raises:
        SMInfoParseError: a line starting an ``sminfo:`` record that does not parse, with
            ``source:line`` in the message; or text without any record.
    """
    records: list[SMRecord] = []
    lines = text.splitlines()
    host = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        sep = _SEPARATOR.match(line.strip())
        if sep:
            host = sep.group("host").strip()
            i += 1
            continue
        pos = line.find("sminfo:")
        if pos < 0:
            i += 1
            continue
        start = i
        prefix = _HOST_PREFIX.match(line.strip())
        record_host = prefix.group("host") if prefix else host
        buffer = line[pos:]
        # A wrapped record: join following lines until the state is there (at most 2 more).
        while not re.search(r"state\s+\d+", buffer) and i + 1 < len(lines) and i - start < 2:
            i += 1
            buffer += " " + lines[i].strip()
        match = _RECORD.search(buffer)
        if not match:
            raise SMInfoParseError(f"not an sminfo record: {line.strip()[:120]!r}", source, start + 1)
        guid_text = match.group("guid")
        guid = f"0x{int(guid_text, 16):016x}"
        state = int(match.group("state"))
        if state not in SM_STATES:
            raise SMInfoParseError(f"SM state {state} is not 0..3", source, start + 1)
        prio = int(match.group("prio"))
        if prio > 15:
            raise SMInfoParseError(f"SM priority {prio} is not 0..15", source, start + 1)
        records.append(
            SMRecord(
                lid=int(match.group("lid")) or None,
                guid=guid,
                activity_count=int(match.group("act")),
                priority=prio,
                state=state,
                host=record_host,
                line=start + 1,
            )
        )
        i += 1
    if not records:
        raise SMInfoParseError("no 'sminfo: sm lid ...' record found", source, 1)
    return records


class SAQueryParseError(TopologyParseError):
    """saquery output that cannot be read; ``str()`` names ``source:line``."""


def parse_saquery_sm_ports(text: str, source: str = "<saquery -s>") -> list[int]:
    """LIDs of the ports whose PortInfo:CapabilityMask has IsSM set, from ``saquery -s``.

    ``saquery -s`` (infiniband-diags) prints an ``IsSM ports`` section of PortInfoRecord dumps
    (``EndPortLid....N``) and then an ``IsSMdisabled ports`` section; only the first counts.
    Returns the LIDs in output order without duplicates.

    Raises:
        SAQueryParseError: no ``IsSM ports`` header, or an ``EndPortLid`` that is not a number.
    """
    lids: list[int] = []
    in_section = False
    seen_header = False
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line == "IsSM ports":
            in_section = seen_header = True
            continue
        if line == "IsSMdisabled ports":
            in_section = False
            continue
        if in_section and line.startswith("EndPortLid"):
            value = line.split(".")[-1].strip()
            try:
                lid = int(value, 0)
            except ValueError:
                raise SAQueryParseError(f"EndPortLid {value!r} is not a number", source, n) from None
            if lid not in lids:
                lids.append(lid)
    if not seen_header:
        raise SAQueryParseError("no 'IsSM ports' section (is this saquery -s output?)", source, 1)
    return lids
