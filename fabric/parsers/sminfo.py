"""Parser of ``sminfo`` output (pure, no Django).

``sminfo(8)`` prints one line (infiniband-diags ``sminfo.c``)::

    sminfo: sm lid 1 sm guid 0x2c90300000001, activity count 1234 priority 15 state 3 SMINFO_MASTER

SMState values are IBTA Vol 1, 14.2.5.13 (0 not active, 1 discovering, 2 standby, 3 master).
"""

from __future__ import annotations

import re

from fabric.guid import normalize_guid

from .records import SMRecord, TopologyParseError

_LINE = re.compile(
    r"sm lid\s+(\d+)\s+sm guid\s+(0x[0-9a-fA-F]+),\s*activity count\s+(\d+)\s+priority\s+(\d+)\s+state\s+(\d+)"
)


def parse_sminfo(text: str, source: str = "<sminfo>") -> SMRecord:
    """The SM that answered ``sminfo``.

    Raises:
        TopologyParseError: no ``sm lid .. sm guid ..`` line in ``text``.
    """
    m = _LINE.search(text)
    if not m:
        raise TopologyParseError("no 'sm lid N sm guid 0x..' line in sminfo output", source, 1)
    return SMRecord(
        guid=normalize_guid(m.group(2)),
        lid=int(m.group(1)) or None,
        priority=int(m.group(4)),
        state=int(m.group(5)),
        activity_count=int(m.group(3)),
    )
