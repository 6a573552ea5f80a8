"""Topology compare (pure, no Django): a fabric as it is against its reference (the cabling plan,
or a discovery an admin approved) — UFM's "topology compare" report for new clusters.

A *snapshot* is plain JSON::

    {"nodes": {guid: {"name": str, "type": "switch"|"ca"|"router"}},
     "links": [{"a": [guid, port], "b": [guid, port], "width": "4x", "speed": "HDR"}]}

(GUIDs canonical as ``fabric.guid.normalize_guid`` gives them; ports are physical port numbers;
width/speed as ``ibnetdiscover`` prints them, empty when not known). :func:`snapshot_from_topology`
makes one from parsed records (``fabric.parsers``); ``fabric.services.reference`` from the database.

:func:`compare` classifies every difference once:

* **miswired**: a reference cable that is not there while a cable that is not in the reference
  shares something with it — the same node pair on other ports (``kind="ports"``), or one end
  on the planned port while the other end lands on another port or switch (``kind="remote"``).
  Each such pair is reported once, as a miswire, not also as a missing and an extra link;
* **missing links** / **extra links**: the other reference-only / current-only cables;
* **missing nodes** / **extra nodes**: GUIDs only in the reference / only now;
* **below reference**: cables in both whose current width or speed is below the reference's
  (fewer lanes, or a slower lane speed in ``fabric.rates.SPEED_ORDER``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .rates import lanes, speed_rank

End = tuple[str, int]
Key = tuple[End, End]


def _end(value) -> End:
    return (str(value[0]), int(value[1]))


def link_key(a, b) -> Key:
    """The unordered key of a cable between ends ``a`` and ``b`` (``(guid, port)`` each)."""
    ea, eb = _end(a), _end(b)
    return (ea, eb) if ea <= eb else (eb, ea)


def snapshot_from_topology(topo) -> dict[str, Any]:
    """A snapshot of a parsed :class:`fabric.parsers.records.Topology` (names: the node
    description as the file gives it)."""
    nodes = {
        guid: {"name": (rec.label or rec.description or guid).strip(), "type": rec.node_type}
        for guid, rec in topo.nodes.items()
    }
    links = [
        {"a": [rec.a_guid, rec.a_port], "b": [rec.b_guid, rec.b_port], "width": rec.width, "speed": rec.speed}
        for rec in topo.links.values()
    ]
    return {"nodes": nodes, "links": links}


def _links(snapshot: dict) -> dict[Key, dict]:
    out = {}
    for link in snapshot.get("links", []):
        out[link_key(link["a"], link["b"])] = link
    return out


def _below(ref: dict, cur: dict) -> list[str]:
    """What of ``cur`` is below ``ref`` (``["width 4x → 2x", "speed HDR → EDR"]``), unknowns skipped."""
    out = []
    rw, cw = lanes(ref.get("width") or ""), lanes(cur.get("width") or "")
    if rw is not None and cw is not None and cw < rw:
        out.append(f"width {ref['width']} → {cur['width']}")
    rs, cs = speed_rank(ref.get("speed") or ""), speed_rank(cur.get("speed") or "")
    if rs >= 0 and cs >= 0 and cs < rs:
        out.append(f"speed {ref['speed']} → {cur['speed']}")
    return out


def compare(reference: dict, current: dict) -> dict[str, Any]:
    """The differences of ``current`` from ``reference`` (two snapshots, see the module docstring).

    Returns ``{"missing_links": [link], "extra_links": [link], "miswired": [{"kind": "ports"|"remote",
    "expected": link, "found": link}], "missing_nodes": [node], "extra_nodes": [node],
    "below_reference": [{"link": link, "reference": link, "what": [str]}], "counts": {section: n},
    "matches": bool}`` where ``link`` = ``{"a": [guid, port], "b": [guid, port], "a_name", "b_name",
    "width", "speed"}`` (names from the current snapshot, else the reference's) and ``node`` =
    ``{"guid", "name", "type"}``; lists are sorted by names, then ports.
    """
    names = {g: n.get("name", g) for g, n in reference.get("nodes", {}).items()}
    names.update({g: n.get("name", g) for g, n in current.get("nodes", {}).items()})

    def show(link: dict) -> dict:
        a, b = _end(link["a"]), _end(link["b"])
        if (names.get(a[0], a[0]), a[1]) > (names.get(b[0], b[0]), b[1]):
            a, b = b, a
        return {
            "a": list(a), "b": list(b), "a_name": names.get(a[0], a[0]), "b_name": names.get(b[0], b[0]),
            "width": link.get("width", ""), "speed": link.get("speed", ""),
        }  # fmt: skip

    ref_links, cur_links = _links(reference), _links(current)
    missing = {k: v for k, v in ref_links.items() if k not in cur_links}
    extra = {k: v for k, v in cur_links.items() if k not in ref_links}

    # pair missing with extra cables: same node pair first, then a shared end
    extra_by_pair: dict[frozenset, list[Key]] = defaultdict(list)
    extra_by_end: dict[End, list[Key]] = defaultdict(list)
    for key in extra:
        extra_by_pair[frozenset((key[0][0], key[1][0]))].append(key)
        extra_by_end[key[0]].append(key)
        extra_by_end[key[1]].append(key)
    miswired = []
    used: set[Key] = set()
    for kind in ("ports", "remote"):
        for key in sorted(missing):
            if key in used:
                continue
            if kind == "ports":
                candidates = extra_by_pair.get(frozenset((key[0][0], key[1][0])), [])
            else:
                candidates = extra_by_end.get(key[0], []) + extra_by_end.get(key[1], [])
            found = next((c for c in sorted(candidates) if c not in used), None)
            if found is None:
                continue
            used.update((key, found))
            miswired.append({"kind": kind, "expected": show(missing[key]), "found": show(extra[found])})

    below = []
    for key, ref in ref_links.items():
        cur = cur_links.get(key)
        if cur is not None and (what := _below(ref, cur)):
            below.append({"link": show(cur), "reference": show(ref), "what": what})

    def node(guid: str, snap: dict) -> dict:
        n = snap["nodes"][guid]
        return {"guid": guid, "name": n.get("name", guid), "type": n.get("type", "")}

    ref_nodes, cur_nodes = reference.get("nodes", {}), current.get("nodes", {})
    by_link = lambda x: (x["a_name"], x["a"][1], x["b_name"], x["b"][1])  # noqa: E731
    report = {
        "missing_links": sorted((show(v) for k, v in missing.items() if k not in used), key=by_link),
        "extra_links": sorted((show(v) for k, v in extra.items() if k not in used), key=by_link),
        "miswired": sorted(miswired, key=lambda m: by_link(m["expected"])),
        "missing_nodes": sorted(
            (node(g, reference) for g in ref_nodes if g not in cur_nodes), key=lambda n: n["name"]
        ),
        "extra_nodes": sorted(
            (node(g, current) for g in cur_nodes if g not in ref_nodes), key=lambda n: n["name"]
        ),
        "below_reference": sorted(below, key=lambda b: by_link(b["link"])),
    }
    report["counts"] = {k: len(v) for k, v in report.items()}
    report["matches"] = not any(report["counts"].values())
    return report
