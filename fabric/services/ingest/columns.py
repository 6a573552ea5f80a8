"""Parse → rows: the columns the ingest writes from a parsed topology, one line each, and the row
tuples made from them (the diffs, the events' field names and the node digests all follow these
tables: ``fabric.services.ingest.plan``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from operator import attrgetter
from typing import Any

from ... import rates
from ...parsers.records import SWITCH, LinkRecord, NodeRecord, PortRecord

# The columns the ingest writes from a parse, one line each: ``column: how``, where ``how`` is the
# record attribute stored as is (a str) or a function of the record (nodes: of the record, its
# tier, its host id and, for a SHARP Aggregation Node, its switch's GUID, else None). The row tuples (the attribute columns first, then the computed ones, see
# :func:`row_maker`), the diffs (and the events' field names) and the per-node digests all follow
# these tables, so a new stored column is one line here (plus its model field and migration) and
# joins the digest by construction (:func:`plan_topology`; the column names salt the digest, so every
# stored digest changes with a table and the first discovery after such a change diffs all).
NODE_COLUMNS: dict[str, str | Callable[[NodeRecord, int, int | None, str | None], Any]] = {
    "node_type": "node_type",
    "system_image_guid": "system_image_guid",
    "vendor_id": "vendor_id",
    "device_id": "device_id",
    "num_ports": "num_ports",
    "enhanced_port0": "enhanced_port0",
    "description": lambda n, tier, host, an: n.description[:128],
    "name": lambda n, tier, host, an: n.label,
    "lid": lambda n, tier, host, an: n.lid if n.node_type == SWITCH else None,
    "lmc": lambda n, tier, host, an: n.lmc if n.node_type == SWITCH else 0,
    "tier": lambda n, tier, host, an: tier,
    "aggregation_node": lambda n, tier, host, an: an is not None,
    "aggregation_switch_guid": lambda n, tier, host, an: an or "",
    "host_id": lambda n, tier, host, an: host,
}
PORT_COLUMNS: dict[str, str | Callable[[PortRecord], Any]] = {
    "port_guid": "port_guid",
    "lid": "lid",
    "lmc": "lmc",
    "state": "state",
    "phys_state": "phys_state",
    "width": "width",
    "speed": "speed",
    "rate_gbps": lambda p: link_rate(p.width, p.speed),
    "label": lambda p: p.label[:32],
}
LINK_COLUMNS: dict[str, str | Callable[[LinkRecord], Any]] = {
    "width": "width",
    "speed": "speed",
    "rate_gbps": lambda lk: link_rate(lk.width, lk.speed),
}


def row_maker(columns: dict[str, str | Callable]) -> tuple[tuple[str, ...], Callable[..., list[tuple]]]:
    """``(column names in row order, rows function)`` of a column table: the attribute columns
    first (one ``attrgetter`` call a record), then the computed ones. ``rows(records, *extra)``
    gives the row tuples of a list of records; ``extra`` are lists parallel to ``records`` (a
    node's tier and host id) passed to the computed columns. Column-wise (``map``) rather than
    a function call per row: this runs for every port of a 5,000-node fabric."""
    plain = [how for how in columns.values() if isinstance(how, str)]
    computed = [how for how in columns.values() if not isinstance(how, str)]
    names = (*(c for c, how in columns.items() if isinstance(how, str)),
             *(c for c, how in columns.items() if not isinstance(how, str)))  # fmt: skip
    get = attrgetter(*plain) if plain else None

    def rows(records: list, *extra: list) -> list[tuple]:
        if len(plain) > 1:
            head = map(get, records)
        else:
            head = ((get(r),) if get else () for r in records)
        if not computed:
            return list(head)
        tail = zip(*[map(f, records, *extra) for f in computed], strict=True)
        return [h + t for h, t in zip(head, tail, strict=True)]

    return names, rows


#: the column names of each table in row-tuple order (the order ``row_maker`` gives)
NODE_FIELDS = row_maker(NODE_COLUMNS)[0]
PORT_FIELDS = row_maker(PORT_COLUMNS)[0]
LINK_FIELDS = row_maker(LINK_COLUMNS)[0]
#: where a port row tuple holds ``state`` and ``phys_state``
PORT_STATE = PORT_FIELDS.index("state")
PORT_PHYS_STATE = PORT_FIELDS.index("phys_state")


@functools.lru_cache(maxsize=256)
def link_rate(width: str, speed: str) -> float | None:
    """Data rate in Gb/s of a link of ``width`` (``"4x"``) and ``speed`` (``"HDR"``), None when
    unknown (``fabric.rates.data_rate_gbps``, cached: every port of a fabric asks)."""
    return rates.data_rate_gbps(width, speed)
