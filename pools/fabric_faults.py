"""Why a host's GPUs are not placed on now, from the fabric: the one reading of "a host with a down
rail" that the scheduler (``scheduler.services.state.unusable_hosts``) and the host pages share
(issue 24: the host page never calls such a host "Free").

A host is unusable while one of its HCAs (CA nodes of its ``fabric.Host`` row)

* could not be reached by the last discoveries (``fabric.Node.unreachable_since``),
* has a link with an open ``link.down`` alarm (the alarm engine's, as the map draws it; the link
  row itself is gone: the alarm's key names both ends by GUID), or
* is gone from the fabric (an open ``node.removed`` alarm whose text names a CA of the host:
  its only cable pulled; the node row is gone, ``fabric.services.derive.host_for`` finds the
  host from the name).

Reads only (alarms are the alarm engine's, nodes the ingest's).
"""

from __future__ import annotations

from collections import defaultdict

from events.models import Alarm
from fabric.choices import NodeType
from fabric.keys import split_port_key
from fabric.models import Host, Node
from fabric.services.derive import host_for


def _link_key_guids(key: str) -> list[str]:
    """The node GUIDs of a link key ``<guid>/<port>-<guid>/<port>`` (``fabric.keys``); [] when
    the key is not one."""
    a, sep, b = key.partition("-")
    out = []
    for part in (a, b) if sep else ():
        try:
            out.append(split_port_key(part)[0])
        except ValueError:
            return []
    return out


def host_fabric_faults(host_ids=None, fabric_ids=None) -> dict[int, list[str]]:
    """``fabric.Host`` id → why it is unusable now (sentences, in the order of the module
    docstring: unreachable HCAs, HCA links down, HCAs gone), for the hosts ``host_ids`` (or
    every host of ``fabric_ids``, or every host). Hosts with nothing wrong are left out."""
    out: dict[int, list[str]] = defaultdict(list)
    cas = Node.objects.filter(host__isnull=False).exclude(node_type=NodeType.SWITCH)
    hosts = Host.objects.all()
    if host_ids is not None:
        cas, hosts = cas.filter(host_id__in=list(host_ids)), hosts.filter(pk__in=list(host_ids))
    if fabric_ids is not None:
        cas, hosts = cas.filter(fabric_id__in=list(fabric_ids)), hosts.filter(fabric_id__in=list(fabric_ids))
    for host_id, name, since in cas.filter(unreachable_since__isnull=False).values_list(
        "host_id", "name", "unreachable_since"
    ):
        out[host_id].append(f"HCA {name} unreachable since {since:%Y-%m-%d %H:%M:%S}")
    alarms = Alarm.objects.open()
    if fabric_ids is not None:
        alarms = alarms.filter(fabric_id__in=list(fabric_ids))
    downs = list(alarms.filter(code="link.down").values_list("fabric_id", "object_key", "object_repr"))
    if downs:
        guids = {g for _, key, _ in downs for g in _link_key_guids(key)}
        host_of = {
            (f, g): h
            for f, g, h in cas.filter(node_guid__in=guids).values_list("fabric_id", "node_guid", "host_id")
        }
        for fabric_id, key, text in downs:
            for g in _link_key_guids(key):
                host_id = host_of.get((fabric_id, g))
                if host_id is not None:
                    out[host_id].append(f"HCA link down: {text or key}")
    removed = list(alarms.filter(code="node.removed").values_list("fabric_id", "object_repr"))
    if removed:
        by_name = {(f, n): pk for pk, f, n in hosts.values_list("pk", "fabric_id", "name")}
        for fabric_id, text in removed:
            host_id = by_name.get((fabric_id, host_for(NodeType.CA, text, text)))
            if host_id is not None:
                out[host_id].append(f"HCA {text} is no longer on the fabric")
    return dict(out)
