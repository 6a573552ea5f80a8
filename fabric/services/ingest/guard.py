"""The removal guard of imports: refuse an ingest that would remove more than a share of the
stored fabric (a file cut short, or of another fabric)."""

from __future__ import annotations

from typing import Any

from ...keys import link_ends, link_name
from ...models import Fabric, Link, Node
from ...parsers.records import Topology


class ImportWouldRemove(ValueError):
    """An import would remove more than the allowed share of the stored fabric (``replace`` not set).

    Attributes: ``nodes``/``links`` (how many stored nodes and links the file lacks), ``stored_nodes``/
    ``stored_links``, ``share`` (the larger removed fraction, 0..1), ``limit`` (the allowed share),
    ``examples`` (up to 20 names of what would go, nodes first: ``"leaf-01 (0x…)"``,
    ``"spine-01 [1] <-> leaf-01 [7]"``).
    """

    def __init__(self, *, nodes: int, links: int, stored_nodes: int, stored_links: int, limit: float,
                 examples: list[str]):  # fmt: skip
        self.nodes, self.links = nodes, links
        self.stored_nodes, self.stored_links = stored_nodes, stored_links
        self.share = max(nodes / max(stored_nodes, 1), links / max(stored_links, 1))
        self.limit = limit
        self.examples = examples
        super().__init__(
            f"this import would remove {nodes} of {stored_nodes} nodes and {links} of {stored_links} links "
            f"({self.share:.0%}, more than the {limit:.0%} allowed); if the file is the whole fabric, "
            "import it again with replace"
        )

    def as_dict(self) -> dict[str, Any]:
        return {"error": str(self), "would_remove": {"nodes": self.nodes, "links": self.links,
                "share": round(self.share, 4), "limit": self.limit, "examples": self.examples}}  # fmt: skip


def check_removal(fabric: Fabric, topology: Topology, limit: float) -> None:
    """Refuse an ingest of ``topology`` into ``fabric`` that would remove more than ``limit`` (0..1)
    of its stored nodes or links (a file cut short, or of another fabric).

    Raises:
        ImportWouldRemove: with what would go.
    """
    stored_nodes = dict(Node.objects.filter(fabric=fabric).values_list("node_guid", "name"))
    if not stored_nodes:
        return
    gone_nodes = [g for g in stored_nodes if g not in topology.nodes]
    stored_links = 0
    gone_links: list[str] = []
    rows = Link.objects.filter(fabric=fabric).values_list(
        "port_a__node__node_guid", "port_a__port_num", "port_b__node__node_guid", "port_b__port_num"
    )
    for ga, pa, gb, pb in rows.iterator(chunk_size=5000):
        stored_links += 1
        key = link_ends(ga, pa, gb, pb)
        if key not in topology.links:
            gone_links.append(link_name((stored_nodes[ga] or ga, pa), (stored_nodes[gb] or gb, pb)))
    if max(len(gone_nodes) / len(stored_nodes), len(gone_links) / max(stored_links, 1)) > limit:
        examples = [f"{stored_nodes[g] or g} ({g})" for g in gone_nodes[:20]]
        examples += gone_links[: 20 - len(examples)]
        raise ImportWouldRemove(nodes=len(gone_nodes), links=len(gone_links), stored_nodes=len(stored_nodes),
                                stored_links=stored_links, limit=limit, examples=examples)  # fmt: skip
