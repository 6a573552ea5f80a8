"""``manage.py show_port NODE PORT [--fabric NAME]``: latest counters and rates of one port as JSON."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from fabric.lookup import node_q
from fabric.models import Fabric, Node, Port
from telemetry.models import RAW_COUNTERS, PortCounters
from telemetry.semantics import DERIVED_FIELDS


def find_node(text: str, fabric: Fabric | None) -> Node:
    """The node ``text`` names by GUID, LID or exact name/description (``fabric.lookup.node_q``);
    raises CommandError when none or several match (then ``--fabric`` disambiguates)."""
    nodes = Node.objects.all() if fabric is None else Node.objects.filter(fabric=fabric)
    text = text.strip()
    found = list(nodes.filter(node_q(text)).select_related("fabric")[:5])
    if not found:
        raise CommandError(f"no node {text!r} (give a GUID, LID, node name or description)")
    if len(found) > 1:
        names = ", ".join(f"{n} in {n.fabric.name}" for n in found)
        raise CommandError(f"{text!r} matches several nodes ({names}); use --fabric or a GUID")
    return found[0]


class Command(BaseCommand):
    help = (
        "Print the latest counters and rates of one port; the last line is JSON with xmit_bytes_per_s, "
        "rcv_bytes_per_s, xmit_wait_per_s, utilisation, congestion, stale and the raw counters."
    )

    def add_arguments(self, parser):
        parser.add_argument("node", help="node GUID, LID, name or description")
        parser.add_argument("port", type=int, help="port number")
        parser.add_argument("--fabric", help="fabric name")

    def handle(self, *args, **opts):
        fabric = None
        if opts["fabric"]:
            fabric = Fabric.objects.filter(name=opts["fabric"]).first()
            if fabric is None:
                raise CommandError(f"no fabric named {opts['fabric']!r}")
        if not 0 <= opts["port"] <= 255:
            raise CommandError(f"port {opts['port']}: InfiniBand port numbers are 0-255")
        node = find_node(opts["node"], fabric)
        port = Port.objects.filter(node=node, port_num=opts["port"]).first()
        if port is None:
            nums = list(node.ports.values_list("port_num", flat=True))
            raise CommandError(f"{node} has no port {opts['port']} (ports: {nums})")
        pc = PortCounters.objects.filter(port=port).select_related("sweep").first()
        remote = None
        link = getattr(port, "link_as_a", None) or getattr(port, "link_as_b", None)
        if link is not None:
            other = link.port_b if link.port_a_id == port.pk else link.port_a
            remote = {
                "node_guid": other.node.node_guid,
                "node": str(other.node),
                "port": other.port_num,
            }
        out = {
            "fabric": node.fabric.name,
            "node_guid": node.node_guid,
            "node": str(node),
            "description": node.description,
            "port": port.port_num,
            "lid": node.lid if node.node_type == "switch" else port.lid,
            "link": f"{port.width}{port.speed}" if port.width else "",
            "rate_gbps": port.rate_gbps,
            "remote": remote,
        }
        if pc is None:
            out.update({"stale": True, "stale_reason": "never polled (run poll_counters)"})
            out.update(dict.fromkeys(DERIVED_FIELDS))
            self.stdout.write(json.dumps(out))
            return
        self.stdout.write(
            f"{node} port {port.port_num}  sampled {pc.sampled_at}  "
            f"{'STALE: ' + pc.stale_reason if pc.stale else ''}"
        )
        out.update(
            {
                "sampled_at": pc.sampled_at.isoformat() if pc.sampled_at else None,
                "sweep": pc.sweep_id,
                "interval_s": pc.sweep.interval_s if pc.sweep else None,
                **{name: getattr(pc, name) for name in DERIVED_FIELDS},
                "error_deltas": pc.error_deltas,
                "saturated": pc.saturated,
                "reset": pc.reset,
                "stale": pc.stale,
                "stale_reason": pc.stale_reason,
                "extended": pc.extended,
                "xmit_bytes": pc.xmit_bytes,
                "rcv_bytes": pc.rcv_bytes,
                "raw": {name: getattr(pc, name) for name in RAW_COUNTERS},
            }
        )
        self.stdout.write(json.dumps(out))
