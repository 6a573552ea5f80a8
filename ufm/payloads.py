"""What the UFM-compatible API answers to reads: Weft's stored fabric, partitions, events and
alarms in the JSON shapes UFM's REST API gives (the fields and types its clients decode; each
view's docstring names the client source read).

Shapes:

* ports (``GET /resources/ports``): a top-level JSON array of port objects (``name`` =
  ``<node guid>_<port>``, GUIDs as 16 lowercase hex digits without ``0x``, ``tier`` an
  integer, ``lid`` an integer, 0 when unknown, ``system_name`` the host name of a CA port (through
  the node-name map: ``Host.name``/``Node.name``), ``description`` ``"Computer IB Port"`` /
  ``"Switch IB Port"`` / ``"Router IB Port"``, ``peer_node_name`` the system name of the node at
  the other end of the cable, ``""`` when unconnected). A SHARP Aggregation Node (the CA inside a
  SHARP-capable switch, ``Node.aggregation_node``) is part of its switch's system, as UFM groups
  nodes into systems by system image GUID (UFM REST API guide, Systems: a system's ``guid`` is the
  system GUID; the AN reports its switch's): its port is a ``"Switch IB Port"`` of the switch's
  ``system_name``/``systemID``/``tier``, never a ``"Computer IB Port"`` (Volcano's discoverer and
  Carbide's ``?sys_type=Computer`` take every Computer port for a compute host's), and its
  ``node_description`` stays ``"Mellanox Technologies Aggregation Node"``;
* systems, links: arrays, or ``{"data": [...], "page_number", "rpp", "total"}`` when a page is
  asked for;
* PKeys: an object keyed by the PKey (``"0x5"``, lowercase, unpadded) with ``partition``,
  ``ip_over_ib``, and ``guids`` (``[{"guid", "membership", "index0"}]``) with ``guids_data``,
  ``qos_conf`` (``{"mtu_limit", "service_level", "rate_limit"}``) with ``qos_conf``.

Nothing here writes. Reads that would describe a fabric Weft knows nothing about yet raise
:class:`ufm.services.UfmUnavailable` in the views (never an empty list: Volcano deletes every
HyperNode it made when it gets no ``Computer`` port).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count, Max, Q, Sum
from django.utils import timezone

from core.cache import get_or_compute
from events.choices import SEVERITY_RANK, Category, Severity
from events.models import Alarm, Event
from events.registry import get as event_type
from events.scoping import scope_alarms, scope_events
from fabric.choices import Membership, NodeType, PhysState, PortState
from fabric.keys import port_key
from fabric.models import Discovery, Fabric, Link, Node, Partition, Port
from fabric.parsers.partitions import DEFAULT_PKEY, KEYWORDS

from .inputs import mtu_limit_of, pkey_text, rate_limit_of, ufm_guid

#: UFM's ``description`` of a port by its node's type (Volcano keeps the rows containing "Computer")
PORT_DESCRIPTION = {NodeType.CA: "Computer IB Port", NodeType.SWITCH: "Switch IB Port",
                    NodeType.ROUTER: "Router IB Port"}  # fmt: skip
#: UFM's system ``type`` by node type
SYSTEM_TYPE = {NodeType.CA: "host", NodeType.SWITCH: "switch", NodeType.ROUTER: "router"}
#: ``?sys_type=`` values UFM takes, and the node type each selects
SYS_TYPES = {"computer": NodeType.CA, "host": NodeType.CA, "switch": NodeType.SWITCH,
             "router": NodeType.ROUTER, "gateway": NodeType.ROUTER}  # fmt: skip
#: PortPhysicalState as UFM writes it (``"Link Up"``)
PHYS_TEXT = {
    PhysState.UNKNOWN: "Unknown", PhysState.SLEEP: "Sleep", PhysState.POLLING: "Polling",
    PhysState.DISABLED: "Disabled", PhysState.TRAINING: "Port Configuration Training",
    PhysState.LINKUP: "Link Up", PhysState.ERROR_RECOVERY: "Link Error Recovery", PhysState.PHY_TEST: "Phy Test",
}  # fmt: skip
#: PortState as UFM writes it (``"Active"``)
STATE_TEXT = {PortState.UNKNOWN: "Unknown", PortState.DOWN: "Down", PortState.INIT: "Initialize",
              PortState.ARMED: "Armed", PortState.ACTIVE: "Active"}  # fmt: skip
#: the name UFM gives the default partition (0x7fff) when Weft stores none
DEFAULT_PARTITION_NAME = "management"
#: what ``GET /app/ufm_version`` says: the UFM REST API level Weft's answers follow
UFM_API_VERSION = "6.19.0"
#: events ``GET /app/events`` lists at most (newest first): UFM keeps a bounded event log too
EVENT_LIMIT = 1000

_PORT_VALUES = (
    "id", "port_num", "port_guid", "lid", "state", "phys_state", "width", "speed", "label",
    "node__node_guid", "node__node_type", "node__system_image_guid", "node__description", "node__name",
    "node__lid", "node__tier", "node__host__name", "node__aggregation_switch_guid",
)  # fmt: skip
_PEER_FIELDS = ("port_num", "port_guid", "label", "lid", "node__node_guid", "node__node_type",
                "node__description", "node__name", "node__lid", "node__host__name",
                "node__aggregation_switch_guid")  # fmt: skip
_PEER_VIA = ("link_as_a__port_b__", "link_as_b__port_a__")


def severity_text(severity: str | None) -> str:
    """A Weft severity as UFM writes it (``"Info"``, ``"Warning"``, ``"Minor"``, ``"Critical"``)."""
    return Severity(severity).label if severity in Severity.values else "Info"


def timestamp_text(at) -> str:
    """A time as UFM's events write it: ``2024-05-28 08:03:05.123`` in Weft's time zone."""
    return timezone.localtime(at).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if at else ""


def _system_name(node_type: str, name: str, host: str | None, guid: str) -> str:
    """A port's ``system_name``: the host for a CA (what schedulers call the node), else the node."""
    if node_type != NodeType.SWITCH and host:
        return host
    return name or ufm_guid(guid)


class _Switches:
    """The switches of a fabric by node GUID (``name``, ``system_image_guid``, ``tier``, ``lid``),
    read once: what a SHARP Aggregation Node's rows borrow from the switch it hangs off."""

    def __init__(self, fabric: Fabric) -> None:
        rows = Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).values_list(
            "node_guid", "name", "system_image_guid", "tier", "lid"
        )
        self.by_guid = {r[0]: r[1:] for r in rows}

    def system_name(self, node_type: str, name: str, host: str | None, guid: str, an_switch: str) -> str:
        """``_system_name``, but an Aggregation Node's is its switch's."""
        if an_switch and an_switch in self.by_guid:
            sw_name = self.by_guid[an_switch][0]
            return sw_name or ufm_guid(an_switch)
        return _system_name(node_type, name, host, guid)


def _dname(port_num: int | None, label: str | None) -> str:
    return label or ("" if port_num is None else str(port_num))


def _external(port_num: int, label: str) -> int:
    """UFM's ``external_number``: the front-panel number of a split label (``"3/2"`` -> 3), else
    the port number."""
    head = (label or "").split("/", 1)[0]
    return int(head) if head.isdigit() else port_num


def port_severities(fabric: Fabric) -> dict[str, str]:
    """``{port key: most severe open alarm's severity}`` for the ports of ``fabric`` with one."""
    out: dict[str, str] = {}
    rows = (
        Alarm.objects.open().filter(fabric=fabric, object_type="port").values_list("object_key", "severity")
    )
    for key, severity in rows:
        if SEVERITY_RANK.get(severity, -1) > SEVERITY_RANK.get(out.get(key), -1):
            out[key] = severity
    return out


def ports(
    fabric: Fabric,
    *,
    node_type: str | None = None,
    active: bool | None = None,
    system: str | None = None,
) -> list[dict]:
    """The physical ports of ``fabric`` (switch port 0 left out) as UFM port objects, ordered by
    node and port. Filters: ``node_type`` (``?sys_type=``), ``active`` (logical state Active or
    not), ``system`` (a canonical GUID: the node's, its system image's or the port's)."""
    peer_values = [via + f for via in _PEER_VIA for f in _PEER_FIELDS]
    rows = Port.objects.filter(node__fabric=fabric).exclude(node__node_type=NodeType.SWITCH, port_num=0)
    if node_type == NodeType.CA:  # Computer ports: no SHARP Aggregation Node's
        rows = rows.filter(node__node_type=node_type, node__aggregation_node=False)
    elif node_type == NodeType.SWITCH:  # the switch systems' ports, their ANs' included
        rows = rows.filter(Q(node__node_type=node_type) | Q(node__aggregation_node=True))
    elif node_type:
        rows = rows.filter(node__node_type=node_type)
    if active is not None:
        rows = rows.filter(state=PortState.ACTIVE) if active else rows.exclude(state=PortState.ACTIVE)
    if system:
        rows = rows.filter(
            Q(node__node_guid=system) | Q(node__system_image_guid=system) | Q(port_guid=system)
        )
    severities = port_severities(fabric)
    switches = _Switches(fabric)
    out = []
    for r in rows.order_by("node__node_guid", "port_num").values(*_PORT_VALUES, *peer_values):
        node_guid = r["node__node_guid"]
        peer = next(({f: r[via + f] for f in _PEER_FIELDS} for via in _PEER_VIA
                     if r[via + "port_num"] is not None), None)  # fmt: skip
        node_type_ = r["node__node_type"]
        lid = r["node__lid"] if node_type_ == NodeType.SWITCH else r["lid"]
        system_id, tier, kind = r["node__system_image_guid"] or node_guid, r["node__tier"], node_type_
        an_switch = r["node__aggregation_switch_guid"]
        if an_switch in switches.by_guid:  # a SHARP Aggregation Node: a port of its switch's system
            _, sw_image, tier, _ = switches.by_guid[an_switch]
            system_id, kind = sw_image or an_switch, NodeType.SWITCH
        out.append(
            {
                "name": f"{ufm_guid(node_guid)}_{r['port_num']}",
                "guid": ufm_guid(r["port_guid"] or node_guid),
                "systemID": ufm_guid(system_id),
                "system_name": switches.system_name(node_type_, r["node__name"], r["node__host__name"],
                                                    node_guid, an_switch),
                "node_description": (r["node__description"] or "").strip(),
                "description": PORT_DESCRIPTION.get(kind, "IB Port"),
                "number": r["port_num"],
                "external_number": _external(r["port_num"], r["label"]),
                "dname": _dname(r["port_num"], r["label"]),
                "tier": int(tier),
                "lid": int(lid or 0),
                "logical_state": STATE_TEXT.get(r["state"], "Unknown"),
                "physical_state": PHYS_TEXT.get(r["phys_state"], "Unknown"),
                "active_width": r["width"] or "",
                "active_speed": r["speed"] or "",
                "peer_node_name": switches.system_name(peer["node__node_type"], peer["node__name"],
                                                       peer["node__host__name"], peer["node__node_guid"],
                                                       peer["node__aggregation_switch_guid"])
                if peer else "",
                "peer_guid": ufm_guid(peer["port_guid"] or peer["node__node_guid"]) if peer else "",
                "peer_lid": int((peer["node__lid"] if peer["node__node_type"] == NodeType.SWITCH
                                 else peer["lid"]) or 0) if peer else 0,
                "peer_port_dname": _dname(peer["port_num"], peer["label"]) if peer else "",
                "peer_node_description": (peer["node__description"] or "").strip() if peer else "",
                "severity": severity_text(severities.get(port_key(node_guid, r["port_num"]))),
                "mtu": None,
            }
        )  # fmt: skip
    return out


def systems(fabric: Fabric, *, node_type: str | None = None) -> list[dict]:
    """The systems of ``fabric`` as UFM system objects: one per switch (and router), one per host
    (its CAs' ports together; a CA without a host is a system of its own). A SHARP Aggregation
    Node is part of its switch's system (its port is listed with the switch's), never a host.
    ``node_type`` keeps one kind (``?type=switch``)."""
    nodes = Node.objects.filter(fabric=fabric).order_by("node_type", "name", "node_guid")
    # an AN cabled to a switch joins that switch's system; one cabled to none stays its own
    in_switch = Q(aggregation_node=True) & ~Q(aggregation_switch_guid="")
    ans = nodes.filter(in_switch) if node_type in (None, NodeType.SWITCH) else nodes.none()
    nodes = nodes.exclude(in_switch)
    if node_type == NodeType.CA:
        nodes = nodes.filter(node_type=node_type, aggregation_node=False)
    elif node_type:
        nodes = nodes.filter(node_type=node_type)
    port_names: dict[int, list[str]] = defaultdict(list)
    port_rows = Port.objects.filter(Q(node__in=nodes) | Q(node__in=ans)).exclude(
        node__node_type=NodeType.SWITCH, port_num=0
    )
    for node_id, guid, num in port_rows.order_by("port_num").values_list(
        "node_id", "node__node_guid", "port_num"
    ):
        port_names[node_id].append(f"{ufm_guid(guid)}_{num}")
    groups: dict[tuple, dict] = {}
    for n in nodes.values("id", "node_guid", "node_type", "system_image_guid", "description", "name",
                          "vendor_id", "device_id", "lid", "host__name"):  # fmt: skip
        host = n["host__name"] if n["node_type"] != NodeType.SWITCH else None
        key = ("host", host) if host else ("node", n["node_guid"])
        system = groups.get(key)
        if system is None:
            guid = ufm_guid(n["system_image_guid"] or n["node_guid"])
            system = groups[key] = {
                "system_name": host or n["name"] or ufm_guid(n["node_guid"]),
                "name": host or n["name"] or ufm_guid(n["node_guid"]),
                "guid": guid,
                "system_guid": guid,
                "type": SYSTEM_TYPE.get(n["node_type"], "host"),
                "description": (n["description"] or "").strip(),
                "vendor": f"0x{n['vendor_id']:06x}" if n["vendor_id"] is not None else "",
                "model": f"0x{n['device_id']:04x}" if n["device_id"] is not None else "",
                "lid": int(n["lid"] or 0),
                "technology": "InfiniBand",
                "ports": [],
                "modules": [],
                "severity": "Info",
            }
        system["ports"].extend(port_names.get(n["id"], []))
    for node_id, switch in ans.values_list("id", "aggregation_switch_guid"):
        system = groups.get(("node", switch))
        if system is not None:
            system["ports"].extend(port_names.get(node_id, []))
    return list(groups.values())


def links(fabric: Fabric) -> list[dict]:
    """The cables of ``fabric`` as UFM link objects (``source_*`` the lower port id); a SHARP
    Aggregation Node's end is described by its switch's name, as its ports are."""
    out = []
    switches = _Switches(fabric)
    fields = ("port_num", "port_guid", "label", "node__node_guid", "node__name", "node__description",
              "node__node_type", "node__host__name", "node__aggregation_switch_guid")  # fmt: skip
    values = [f"port_{end}__{f}" for end in "ab" for f in fields]
    for r in (
        Link.objects.filter(fabric=fabric).order_by("port_a").values("width", "speed", "rate_gbps", *values)
    ):
        a = {f: r[f"port_a__{f}"] for f in fields}
        b = {f: r[f"port_b__{f}"] for f in fields}
        out.append(
            {
                "name": f"{ufm_guid(a['node__node_guid'])}_{a['port_num']}:"
                f"{ufm_guid(b['node__node_guid'])}_{b['port_num']}",
                "source_guid": ufm_guid(a["node__node_guid"]),
                "source_port": a["port_num"],
                "source_port_dname": _dname(a["port_num"], a["label"]),
                "source_port_node_description": switches.system_name(
                    a["node__node_type"], a["node__name"], a["node__host__name"], a["node__node_guid"],
                    a["node__aggregation_switch_guid"]),
                "destination_guid": ufm_guid(b["node__node_guid"]),
                "destination_port": b["port_num"],
                "destination_port_dname": _dname(b["port_num"], b["label"]),
                "destination_port_node_description": switches.system_name(
                    b["node__node_type"], b["node__name"], b["node__host__name"], b["node__node_guid"],
                    b["node__aggregation_switch_guid"]),
                "width": r["width"] or "",
                "speed": r["speed"] or "",
                "rate_gbps": r["rate_gbps"],
                "severity": "Info",
            }
        )  # fmt: skip
    return out


def page(rows: list, page_number: int | None, rpp: int | None) -> list | dict:
    """``rows`` as UFM pages them: the plain list, or with ``page_number``/``rpp`` (either; the
    other defaults to 1 / all) ``{"data": rows of that page, "page_number", "rpp", "total"}``."""
    if page_number is None and rpp is None:
        return rows
    page_number, rpp = page_number or 1, rpp or max(1, len(rows))
    start = (page_number - 1) * rpp
    return {"data": rows[start : start + rpp], "page_number": page_number, "rpp": rpp, "total": len(rows)}


# -- partitions ----------------------------------------------------------------------------------


def _qos(p: Partition | None) -> dict:
    return {
        "mtu_limit": mtu_limit_of(p.mtu if p else None),
        "service_level": (p.sl if p and p.sl is not None else 0),
        "rate_limit": rate_limit_of(p.rate if p else None),
    }


def _ufm_membership(membership: str) -> str:
    """UFM has full and limited only: Weft's ``both`` (full and limited) shows as full."""
    return "limited" if membership == Membership.LIMITED else "full"


def pkey_object(p: Partition | None, *, guids_data: bool, qos_conf: bool) -> dict:
    """One partition as UFM writes it; ``p`` None is the default partition Weft generates when
    none is stored (``Default=0x7fff, ipoib : ALL=full, SELF=full``)."""
    out: dict = {
        "partition": (p.name if p else DEFAULT_PARTITION_NAME),
        "ip_over_ib": bool(p.ipoib) if p else True,
    }
    if guids_data:
        members = list(p.members.all()) if p else []
        index0 = bool(p.indx0) if p else False
        out["guids"] = [
            {"guid": ufm_guid(m.port_guid), "membership": _ufm_membership(m.membership), "index0": index0}
            for m in sorted(members, key=lambda m: m.port_guid)
            if m.port_guid not in KEYWORDS
        ]
        if p is None or p.pkey == DEFAULT_PKEY:
            # UFM >= 6.19 gives the default partition's membership of all ports (keyword ALL)
            every = [m.membership for m in members if m.port_guid in ("ALL", "ALL_CAS")]
            out["membership"] = _ufm_membership(every[0]) if every else "full"
            out["index0"] = index0
    if qos_conf:
        out["qos_conf"] = _qos(p)
    return out


def pkeys(fabric: Fabric, *, guids_data: bool, qos_conf: bool) -> dict:
    """Every partition of ``fabric`` keyed by PKey (``"0x7fff"`` always there: OpenSM always has
    the default partition)."""
    parts = Partition.objects.filter(fabric=fabric).order_by("pkey")
    if guids_data:
        parts = parts.prefetch_related("members")
    out = {pkey_text(p.pkey): pkey_object(p, guids_data=guids_data, qos_conf=qos_conf) for p in parts}
    if pkey_text(DEFAULT_PKEY) not in out:
        out = {pkey_text(DEFAULT_PKEY): pkey_object(None, guids_data=guids_data, qos_conf=qos_conf), **out}
    return out


def pkey(fabric: Fabric, value: int, *, guids_data: bool, qos_conf: bool) -> dict:
    """One partition by PKey; ``{}`` when there is none (UFM's answer, 200: NVIDIA Carbide reads
    ``{}`` as "not found" and lets its partition state machine finish a deletion)."""
    p = Partition.objects.filter(fabric=fabric, pkey=value).prefetch_related("members").first()
    if p is None and value != DEFAULT_PKEY:
        return {}
    return pkey_object(p, guids_data=guids_data, qos_conf=qos_conf)


# -- app: version, SM configuration, versions, events, alarms -----------------------------------


def _digest(rows: Iterable) -> int:
    h = hashlib.blake2b(digest_size=4)
    for row in rows:
        h.update(repr(row).encode())
        h.update(b"\n")
    return int.from_bytes(h.digest(), "big") & 0x7FFFFFFF


def _topology_versions(fabric: Fabric) -> dict[str, int]:
    switches = Node.objects.filter(fabric=fabric, node_type=NodeType.SWITCH).order_by("node_guid")
    port_rows = Port.objects.filter(node__fabric=fabric).order_by("node__node_guid", "port_num")
    link_rows = Link.objects.filter(fabric=fabric).order_by("port_a__node__node_guid", "port_a__port_num")
    return {
        "switches_version": _digest(
            switches.values_list("node_guid", "name", "description", "lid", "num_ports")
        ),
        "ports_version": _digest(
            port_rows.values_list(
                "node__node_guid",
                "port_num",
                "port_guid",
                "lid",
                "state",
                "phys_state",
                "width",
                "speed",
                "node__name",
            )  # fmt: skip
        ),
        "links_version": _digest(
            link_rows.values_list(
                "port_a__node__node_guid",
                "port_a__port_num",
                "port_b__node__node_guid",
                "port_b__port_num",
                "width",
                "speed",
            )  # fmt: skip
        ),
    }


def versioning(fabric: Fabric) -> dict[str, int]:
    """``{"switches_version", "ports_version", "links_version", "alarms_version",
    "events_version"}``: numbers that change when those change (UFM clients poll them to know
    when to read again). The topology ones are digests of the stored rows (cached per latest
    discovery row and node-name map change: every writer of nodes, ports and links records a
    Discovery); ``alarms_version`` a digest of the open and cleared alarms' counts and times;
    ``events_version`` the id of the newest event (it only grows)."""
    latest = Discovery.objects.filter(fabric=fabric).order_by("-pk").values_list("pk", flat=True).first()
    changed = fabric.node_name_map_changed.timestamp() if fabric.node_name_map_changed else 0
    topo = get_or_compute(
        f"ufm.versioning.{fabric.pk}.{latest}.{changed}", lambda: _topology_versions(fabric), 3600
    )
    alarms = Alarm.objects.filter(fabric=fabric).aggregate(
        n=Count("id"), top=Max("id"), seen=Max("last_seen"), cleared=Max("cleared_at"),
        acked=Max("acknowledged_at"), count=Sum("count"),
        open=Count("id", filter=~Q(state="cleared")),
    )  # fmt: skip
    top_event = Event.objects.filter(fabric=fabric).aggregate(top=Max("id"))["top"] or 0
    return {**topo, "alarms_version": _digest(sorted(alarms.items())), "events_version": int(top_event)}


def _object_name(obj_repr: str, key: str) -> str:
    return obj_repr or key or "Grid"


def _category(code: str, category: str) -> str:
    return Category(category).label if category in Category.values else "Fabric Notification"


def events(fabric: Fabric, *, severity: str | None = None, object_name: str | None = None,
           type_: str | None = None, category: str | None = None, limit: int = EVENT_LIMIT,
           user=None) -> list[dict]:  # fmt: skip
    """The newest ``limit`` events of ``fabric`` as UFM event objects, newest first; filters as
    UFM's (``severity`` by UFM's name, ``object_name``, ``type`` the event code, ``category``);
    with ``user``, only the events that user may read (``events.scoping``: a tenant member does
    not see another tenant's job and allocation events)."""
    rows = Event.objects.filter(fabric=fabric)
    if user is not None:
        rows = scope_events(rows, user)
    if severity:
        rows = rows.filter(severity=severity.strip().lower())
    if object_name:
        rows = rows.filter(object_repr=object_name)
    if type_:
        rows = rows.filter(code=type_)
    if category:
        wanted = [
            c.value for c in Category if c.label.lower() == category.strip().lower() or c.value == category
        ]
        rows = rows.filter(category__in=wanted)
    out = []
    for e in rows.order_by("-at", "-id")[:limit].values("id", "at", "code", "severity", "category",
                                                         "object_repr", "object_key", "message"):  # fmt: skip
        kind = event_type(e["code"])
        out.append(
            {
                "id": e["id"],
                "name": kind.name if kind else e["code"],
                "type": e["code"],
                "event_type": e["code"],
                "severity": severity_text(e["severity"]),
                "timestamp": timestamp_text(e["at"]),
                "counter": "N/A",
                "category": _category(e["code"], e["category"]),
                "object_name": _object_name(e["object_repr"], e["object_key"]),
                "object_path": e["object_key"] or "Grid",
                "write_to_syslog": False,
                "description": e["message"],
            }
        )
    return out


def alarms(fabric: Fabric, user=None) -> list[dict]:
    """The open alarms of ``fabric`` (active and acknowledged) as UFM alarm objects, most
    severe first; with ``user``, only those the user may read (``events.scoping``)."""
    out = []
    rows = Alarm.objects.open().filter(fabric=fabric)
    if user is not None:
        rows = scope_alarms(rows, user)
    for a in rows.by_severity().values(
        "id", "code", "severity", "category", "state", "object_repr", "object_key", "message",
        "first_seen", "last_seen", "count",
    ):  # fmt: skip
        kind = event_type(a["code"])
        out.append(
            {
                "id": a["id"],
                "name": kind.name if kind else a["code"],
                "type": a["code"],
                "event_type": a["code"],
                "severity": severity_text(a["severity"]),
                "timestamp": timestamp_text(a["first_seen"]),
                "last_updated": timestamp_text(a["last_seen"]),
                "counter": a["count"],
                "category": _category(a["code"], a["category"]),
                "object_name": _object_name(a["object_repr"], a["object_key"]),
                "object_path": a["object_key"] or "Grid",
                "description": a["message"],
                "acknowledged": a["state"] == "acknowledged",
                "reason": a["message"],
            }
        )
    return out


#: OpenSM's own defaults for the keys (``opensm --create-config``: an options file without them)
OPENSM_KEY_DEFAULTS = {"m_key": "0x0000000000000000", "sm_key": "0x0000000000000001",
                       "sa_key": "0x0000000000000001", "m_key_per_port": False}  # fmt: skip


def parse_opensm_options(text: str) -> dict:
    """The keys of an OpenSM options file (``opensm.conf``: ``name value`` lines, ``#`` comments)
    that ``/app/smconf`` shows: ``m_key``, ``sm_key``, ``sa_key`` (as written, lowercase) and
    ``m_key_per_port`` (``TRUE``/``FALSE``). Keys it does not set keep OpenSM's defaults."""
    out = dict(OPENSM_KEY_DEFAULTS)
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) != 2 or words[0] not in out:
            continue
        name, value = words
        if name == "m_key_per_port":
            out[name] = value.upper() == "TRUE"
        else:
            try:
                out[name] = f"0x{int(value, 0):016x}"
            except ValueError:
                continue
    return out


def smconf(fabric: Fabric, *, secrets: bool) -> dict:
    """``{"subnet_prefix", "m_key", "sm_key", "sa_key", "m_key_per_port"}`` of ``fabric``'s SM:
    the subnet prefix Weft stores (``Fabric.subnet_prefix``, else the IB default
    ``0xfe80000000000000``), the keys from ``WEFT_OPENSM_CONF`` (OpenSM's defaults when unset or
    unreadable). ``secrets`` False (below Admin) leaves the keys out."""
    out: dict = {"subnet_prefix": fabric.subnet_prefix or "0xfe80000000000000"}
    if not secrets:
        return out
    path = settings.WEFT_OPENSM_CONF
    text = ""
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read(1 << 20)
        except OSError:
            text = ""
    return {**out, **parse_opensm_options(text)}
