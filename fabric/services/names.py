"""The names admins see: a fabric's node-name map applied to its nodes.

A fabric carries at most one map (``Fabric.node_name_map``: uploaded text, or
``Fabric.node_name_map_path``: a file on this server, read at every discovery and import). Every
node's ``Node.name`` is :func:`fabric.services.derive.display_name` of its GUID and raw
description under that map, and its host :func:`fabric.services.derive.host_for`; ingest writes
both for the nodes it sees (:func:`label_topology`), :func:`rename_nodes` for the stored nodes
when the map changes (``fabric.services.requests.set_node_name_map``).
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from ..models import Fabric, Host, Node
from ..parsers.node_name_map import NodeNameMapError, parse_node_name_map
from ..parsers.records import Topology
from .derive import display_name, host_for

#: largest map file read from a path (a map of 100,000 nodes is ~6 MB)
MAX_MAP_BYTES = 16 * 1024 * 1024


class MapUnreadable(Exception):
    """A map path that cannot be read (missing, not a file, too large, not UTF-8): ``str()`` says why."""


def read_map_path(path: str) -> str:
    """The text of the map file at ``path`` (UTF-8; undecodable bytes are an error).

    Raises:
        MapUnreadable: not an absolute path inside ``settings.WEFT_NODE_NAME_MAP_DIRS`` (after
            resolving links), missing, not a regular file, unreadable, larger than
            :data:`MAX_MAP_BYTES` or not UTF-8 text.
    """
    if not os.path.isabs(path):
        raise MapUnreadable(f"{path}: not an absolute path")
    p = Path(path)
    real = os.path.realpath(path)
    allowed = [os.path.realpath(d) for d in settings.WEFT_NODE_NAME_MAP_DIRS if d]
    if not any(os.path.commonpath([real, d]) == d for d in allowed):
        raise MapUnreadable(f"{path}: not in a node-name map directory ({', '.join(allowed) or 'none'}; "
                            "WEFT_NODE_NAME_MAP_DIRS)")  # fmt: skip
    try:
        if not p.is_file():
            raise MapUnreadable(f"{path}: not a file on this server")
        if p.stat().st_size > MAX_MAP_BYTES:
            raise MapUnreadable(f"{path}: larger than {MAX_MAP_BYTES // 2**20} MiB")
        return p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise MapUnreadable(f"{path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise MapUnreadable(f"{path}: not UTF-8 text (byte {exc.start})") from exc


def fabric_names(fabric: Fabric) -> dict[str, str]:
    """The GUID → name entries of ``fabric``'s map (``{}`` when it has none).

    Raises:
        MapUnreadable: the map path cannot be read.
        NodeNameMapError: the map has bad lines (located).
    """
    if fabric.node_name_map:
        return parse_node_name_map(fabric.node_name_map, "node-name map").names
    if fabric.node_name_map_path:
        path = fabric.node_name_map_path
        return parse_node_name_map(read_map_path(path), path).names
    return {}


def label_topology(fabric: Fabric, topology: Topology) -> None:
    """Set ``label`` (the display name) on every node record of ``topology`` from ``fabric``'s
    map, for ingest. A map path that became unreadable or bad since it was set does not fail the
    discovery: the nodes keep the names they have (new ones get their description) and the
    Discovery carries a warning naming the file and the bad line."""
    try:
        names = fabric_names(fabric)
    except (MapUnreadable, NodeNameMapError) as exc:
        first = str(exc).splitlines()[0]
        topology.warn(0, f"node-name map not applied, names kept as they were: {first}")
        names = dict(Node.objects.filter(fabric=fabric).exclude(name="").values_list("node_guid", "name"))
    for guid, node in topology.nodes.items():
        node.label = display_name(guid, node.description, names)


def rename_nodes(fabric: Fabric, names: dict[str, str]) -> dict[str, int]:
    """Apply ``names`` (GUID → name) to every stored node of ``fabric``: ``Node.name`` and the
    host derived from it (hosts are created when missing; a host left without nodes is kept, as
    ingest keeps it: pools may refer to it). Call inside the caller's transaction with the fabric
    locked.

    Returns:
        ``{"renamed": nodes whose name changed, "rehosted": nodes whose host changed,
        "hosts_created": n}``.
    """
    rows = list(Node.objects.filter(fabric=fabric).values_list("id", "node_guid", "node_type", "description",
                                                                "name", "host_id", "aggregation_node"))  # fmt: skip
    hosts = dict(Host.objects.filter(fabric=fabric).values_list("name", "id"))
    wanted: dict[int, tuple[str, str | None]] = {}
    for node_id, guid, node_type, description, _, _, aggregation in rows:
        name = display_name(guid, description, names)
        # a SHARP Aggregation Node (stored so by the ingest) stays host-less whatever its name
        wanted[node_id] = (name, None if aggregation else host_for(node_type, description, name))
    missing = sorted({h for _, h in wanted.values() if h and h not in hosts})
    if missing:
        Host.objects.bulk_create([Host(fabric=fabric, name=h) for h in missing])
        hosts = dict(Host.objects.filter(fabric=fabric).values_list("name", "id"))
    updates: list[Node] = []
    renamed = rehosted = 0
    for node_id, _, _, _, old_name, old_host, _ in rows:
        name, host = wanted[node_id]
        host_id = hosts[host] if host else None
        if name == old_name and host_id == old_host:
            continue
        renamed += name != old_name
        rehosted += host_id != old_host
        # digest None: these rows no longer match their digests, the next discovery diffs them
        updates.append(Node(id=node_id, name=name, host_id=host_id, digest=None))
    if updates:
        Node.objects.bulk_update(updates, ["name", "host_id", "digest"], batch_size=2000)
    return {"renamed": renamed, "rehosted": rehosted, "hosts_created": len(missing)}


def check_map(text: str | None, path: str | None, source: str = "node-name map") -> dict[str, str]:
    """Parse the map an admin gives (exactly one of ``text`` and ``path``; ``""``/None for
    none) and return its entries; used before anything is stored. ``source``: the uploaded
    file's name, which errors cite (a path cites itself).

    Raises:
        MapUnreadable: ``path`` cannot be read, or ``text`` is larger than :data:`MAX_MAP_BYTES`.
        NodeNameMapError: bad lines (located).
        ValueError: both given.
    """
    if text and path:
        raise ValueError("give the map as text or as a path on the server, not both")
    if text and len(text) > MAX_MAP_BYTES:
        raise MapUnreadable(f"{source}: larger than {MAX_MAP_BYTES // 2**20} MiB")
    if path:
        return parse_node_name_map(read_map_path(path), path).names
    return parse_node_name_map(text or "", source).names
