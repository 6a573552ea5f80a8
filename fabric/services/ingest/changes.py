"""What one topology write changed: the accumulator every writer of the ingest fills (events,
natural keys added/removed/changed, rows written) and the names its events give ports and links."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from events.services import EventSpec

from ...choices import NodeType
from ...keys import LinkKey, link_name, port_name
from ...parsers.records import Topology


@dataclass
class Changes:
    events: list[EventSpec] = field(default_factory=list)
    added: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    removed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "links": []})
    changed: dict[str, list] = field(default_factory=lambda: {"nodes": [], "ports": [], "links": []})
    rows: int = 0
    initial: bool = False  # first discovery of an empty fabric: no per-object events
    #: nodes whose rows this ingest left differing from the parse (a partial run kept a port or
    #: link, a notice was fresher): their digest is cleared, so the next discovery diffs them
    unsynced: set[str] = field(default_factory=set)
    #: names of the stored nodes this ingest removes (``{guid: Node.name}``): the removed end of a
    #: ``link.down`` is named as admins knew it, not by its GUID
    gone_names: dict[str, str] = field(default_factory=dict)


def change_event(code: str, message: str, **kw: Any) -> EventSpec:
    # severity and category: the registered type's (fabric.event_types), set by record_events
    return EventSpec(code=code, message=message, **kw)


def port_repr(topo: Topology, key: tuple[str, int]) -> str:
    """``port_name`` of a port of a parsed topology (its node's description, else the GUID)."""
    node = topo.nodes.get(key[0])
    return port_name((node.description if node else "") or key[0], key[1])


def link_repr(topo: Topology, key: LinkKey, gone_names: dict[str, str] | None = None) -> str:
    """``link_name`` of a link of a parsed topology: each end by its node's display name in the
    topology, else (a node this ingest removes) by its stored name in ``gone_names``, else GUID."""
    parts = []
    for guid, port in key:
        node = topo.nodes.get(guid)
        name = node.label if node else (gone_names or {}).get(guid, "")
        parts.append((name or guid, port))
    return link_name(*parts)


_TYPE_NAMES = dict(NodeType.choices)


def type_name(node_type: str) -> str:
    """The display name of a node type (``"Switch"``, ``"Channel Adapter"``…), else the value."""
    return _TYPE_NAMES.get(node_type, node_type)
