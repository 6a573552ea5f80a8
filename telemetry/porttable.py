"""The ports table: every port of a fabric with its link, state and latest counters, filtered,
sorted and paginated in the database (``/ports/``, its CSV and ``/api/fabric/port-table/``).

Reads the one store of the latest rates, ``telemetry.models.PortCounters`` (written by the sweep,
``telemetry.services.sweep``), joined to the port, its node and the remote end in **one** query per
page (``select_related`` of the reverse one-to-ones, annotations for the error total and the peer
name): no query per row, so a page of Selene (25k ports) costs the same as a page of the lab.

Parameters (GET, all optional; bad values raise :class:`BadParam`, a 400 naming the parameter):

``state``     port states, comma-separated names or numbers (``active,down`` / ``4,1``)
``below``     ``1``: linked ports whose data rate (Gb/s) is below the fabric's norm (the most common
              rate of its active linked ports, :func:`fabric_norm`)
``errors``    ``1``: an error counter total above 0; ``new``: an error counter rose in the last interval
``congested`` ``1``: congestion index ≥ ``congestion_min`` (0..1, default :data:`CONGESTED`)
``tier``      node tiers (names or numbers: ``leaf,spine``); ``role`` switch roles (``compute``…)
``type``      ``switch`` / ``ca`` / ``router``; ``node`` node name or GUID contains (case-insensitive)
``stale``     ``1``: ports the last sweep did not read
``sort``      a key of :data:`SORTS`, ``-`` prefix for descending (default ``node``)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, F, IntegerField, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from core.csvcells import spreadsheet_safe
from fabric.choices import FabricRole, NodeType, PortState, Tier
from fabric.keys import port_key
from fabric.models import Fabric, Port
from fabric.querysets import PORT_LINK_RELATED

from .models import ERROR_COUNTERS

log = logging.getLogger(__name__)

#: default congestion index (0..1) from which a port counts as congested: the default threshold
#: of the ``port.congestion`` event rule (``events.event_types``)
CONGESTED = 0.5

#: sort keys → model expressions (``port_num`` breaks ties so pages are stable)
SORTS: dict[str, tuple[str, ...]] = {
    "node": ("node__name", "port_num"),
    "port": ("port_num", "node__name"),
    "peer": ("peer_name", "node__name", "port_num"),
    "state": ("state", "node__name", "port_num"),
    "rate": ("rate_gbps", "node__name", "port_num"),
    "lid": ("lid_any", "port_num"),
    "xmit": ("counters__xmit_bytes_per_s", "node__name", "port_num"),
    "rcv": ("counters__rcv_bytes_per_s", "node__name", "port_num"),
    "utilisation": ("counters__utilisation", "node__name", "port_num"),
    "congestion": ("counters__congestion", "node__name", "port_num"),
    "xmit_wait": ("counters__xmit_wait_per_s", "node__name", "port_num"),
    "errors": ("error_total", "node__name", "port_num"),
}


#: annotations of port rows by apps above telemetry (it never imports them): name → provider
#: ``fn(port keys, user) -> {port key: value}`` (``fabric.keys.port_key``; ``user`` the reader,
#: whose scope the values keep, or None); registered from their ``AppConfig.ready()`` (the
#: scheduler's ``jobs``: which jobs cross each port, those the user may read)
PORT_ANNOTATIONS: dict[str, Callable[..., dict[str, Any]]] = {}


def register_port_annotation(name: str, provider: Callable[[list[str]], dict[str, Any]]) -> None:
    """Add (or replace) the provider of ``row[name]`` on the ports table and the port page."""
    PORT_ANNOTATIONS[name] = provider


def annotations(keys: list[str], user=None) -> dict[str, dict[str, Any]]:
    """``{port key: {name: value}}`` of every registered annotation for the ports ``keys``
    (``fabric.keys.port_key``; one provider call each) as ``user`` may read them (None: all):
    the heatmap's tooltip and hot-spot list read it (``telemetry.api.heatmap``). A port without
    a value gets ``[]``; a provider that fails gives ``[]`` for all (logged)."""
    out: dict[str, dict[str, Any]] = {k: {} for k in keys}
    for name, provider in list(PORT_ANNOTATIONS.items()):
        try:
            got = provider(list(keys), user) if keys else {}
        except Exception:
            log.exception("port annotation %s failed", name)
            got = {}
        for k in keys:
            out[k][name] = got.get(k, [])
    return out


def annotate_rows(rows: list[dict], user=None) -> list[dict]:
    """Set each registered annotation on ``rows`` (``row_values`` dicts; one provider call per
    page), as ``user`` may read them: ``row[name]`` = the provider's value for the row's port,
    else ``[]``. A provider that fails leaves ``[]`` (logged): the table still shows."""
    keys = [port_key(r["node_guid"], r["port"]) for r in rows]
    got = annotations(keys, user)
    for r, k in zip(rows, keys, strict=True):
        r.update(got[k])
    return rows


class BadParam(ValueError):
    """A query parameter the table cannot use: ``param`` names it, the message says why."""

    def __init__(self, param: str, message: str):
        super().__init__(f"{param}: {message}")
        self.param = param


def _enum_list(param: str, text: str, enum) -> list:
    out = []
    names = {m.label.lower(): m.value for m in enum} | {m.name.lower(): m.value for m in enum}
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part in names:
            out.append(names[part])
        elif part.isascii() and part.isdigit() and int(part) in enum.values:
            out.append(int(part))
        else:
            allowed = ", ".join(m.name.lower() for m in enum)
            raise BadParam(param, f"{part!r} is not one of {allowed}")
    return out


@dataclass
class PortTableQuery:
    """The parsed parameters (see the module docstring); :meth:`from_params` validates."""

    states: list[int] = field(default_factory=list)
    below: bool = False
    errors: str = ""
    congested: bool = False
    congestion_min: float = CONGESTED
    tiers: list[int] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    node_types: list[str] = field(default_factory=list)
    node: str = ""
    stale: bool = False
    sort: str = "node"

    @classmethod
    def from_params(cls, params) -> PortTableQuery:
        """From a ``QueryDict``/dict of strings; raises :class:`BadParam`."""
        q = cls()
        get = lambda name: (params.get(name) or "").strip()  # noqa: E731
        q.states = _enum_list("state", get("state"), PortState)
        q.tiers = _enum_list("tier", get("tier"), Tier)
        q.roles = [str(v) for v in _enum_list("role", get("role"), FabricRole)]
        q.node_types = [str(v) for v in _enum_list("type", get("type"), NodeType)]
        q.below = get("below") in {"1", "true", "on"}
        q.congested = get("congested") in {"1", "true", "on"}
        q.stale = get("stale") in {"1", "true", "on"}
        q.errors = get("errors")
        if q.errors in {"true", "on"}:
            q.errors = "1"
        if q.errors not in {"", "0", "1", "new"}:
            raise BadParam("errors", "use 1 (a total above 0) or new (rose in the last interval)")
        if q.errors == "0":
            q.errors = ""
        if cmin := get("congestion_min"):
            try:
                q.congestion_min = float(cmin)
            except ValueError:
                raise BadParam("congestion_min", f"{cmin!r} is not a number") from None
            if not 0 <= q.congestion_min <= 1:
                raise BadParam("congestion_min", "a congestion index is between 0 and 1")
        q.node = get("node")[:128]
        if "\x00" in q.node:  # PostgreSQL refuses it in a text parameter (DataError)
            raise BadParam("node", "a node name has no NUL character")
        sort = get("sort") or "node"
        if sort.lstrip("-") not in SORTS:
            raise BadParam("sort", f"{sort!r} is not one of {', '.join(SORTS)}")
        q.sort = sort
        return q

    def as_params(self) -> dict[str, str]:
        """The non-default parameters, to rebuild links (pages, CSV) with the same filter."""
        out = {}
        if self.states:
            out["state"] = ",".join(PortState(s).name.lower() for s in self.states)
        if self.tiers:
            out["tier"] = ",".join(Tier(t).name.lower() for t in self.tiers)
        if self.roles:
            out["role"] = ",".join(self.roles)
        if self.node_types:
            out["type"] = ",".join(self.node_types)
        for name in ("below", "congested", "stale"):
            if getattr(self, name):
                out[name] = "1"
        if self.errors:
            out["errors"] = self.errors
        if self.congested and self.congestion_min != CONGESTED:
            out["congestion_min"] = f"{self.congestion_min:g}"
        if self.node:
            out["node"] = self.node
        if self.sort != "node":
            out["sort"] = self.sort
        return out


@dataclass(frozen=True)
class Norm:
    """A fabric's usual link: ``rate_gbps`` (Gb/s data rate), ``width`` (``"4x"``), ``speed``
    (``"HDR"``), ``ports`` how many active linked ports have it, of ``total``; None/"" when the
    fabric has no active linked port."""

    rate_gbps: float | None
    width: str
    speed: str
    ports: int
    total: int


def fabric_norm(fabric: Fabric) -> Norm:
    """The most common (width, speed, rate) of the fabric's active linked ports (one grouped
    query, counted in the database)."""
    linked = Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False)
    groups = list(
        Port.objects.filter(linked, node__fabric=fabric, state=PortState.ACTIVE, rate_gbps__isnull=False)
        .order_by()
        .values_list("width", "speed", "rate_gbps")
        .annotate(n=Count("id"))
    )
    if not groups:
        return Norm(None, "", "", 0, 0)
    width, speed, rate, n = max(groups, key=lambda g: (g[3], g[2]))
    return Norm(rate, width, speed, n, sum(g[3] for g in groups))


def error_total_expr():
    """Sum of the port's error counters as last read (0 for unread counters)."""
    expr = Value(0, output_field=IntegerField())
    for name in ERROR_COUNTERS:
        expr = expr + Coalesce(F(f"counters__{name}"), Value(0))
    return expr


def port_table(fabric: Fabric, query: PortTableQuery, norm: Norm | None = None) -> QuerySet[Port]:
    """The fabric's ports filtered and sorted by ``query``: each with ``node``, ``counters`` (or
    no row: never swept), its link and remote port with node (``Port.link``/``Port.remote``), and
    annotations ``error_total`` (int), ``peer_name`` (remote node name or None), ``lid_any``
    (the port's LID, else its switch's). ``norm`` (for ``below``) is computed when not given."""
    qs = (
        Port.objects.filter(node__fabric=fabric)
        .select_related("node", "counters", *PORT_LINK_RELATED)
        .annotate(
            error_total=error_total_expr(),
            peer_name=Coalesce("link_as_a__port_b__node__name", "link_as_b__port_a__node__name"),
            lid_any=Coalesce("lid", "node__lid"),
        )
    )
    if query.states:
        qs = qs.filter(state__in=query.states)
    if query.tiers:
        qs = qs.filter(node__tier__in=query.tiers)
    if query.roles:
        qs = qs.filter(node__node_type=NodeType.SWITCH, node__role__in=query.roles)
    if query.node_types:
        qs = qs.filter(node__node_type__in=query.node_types)
    if query.node:
        qs = qs.filter(Q(node__name__icontains=query.node) | Q(node__node_guid__icontains=query.node.lower()))
    if query.below:
        norm = norm or fabric_norm(fabric)
        if norm.rate_gbps is None:
            qs = qs.none()
        else:
            linked = Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False)
            qs = qs.filter(linked, rate_gbps__lt=norm.rate_gbps)
    if query.errors == "1":
        qs = qs.filter(error_total__gt=0)
    elif query.errors == "new":
        qs = qs.filter(counters__error_deltas__isnull=False).exclude(counters__error_deltas={})
    if query.congested:
        qs = qs.filter(counters__congestion__gte=query.congestion_min)
    if query.stale:
        qs = qs.filter(counters__stale=True)
    keys = SORTS[query.sort.lstrip("-")]
    desc = query.sort.startswith("-")
    first = F(keys[0]).desc(nulls_last=True) if desc else F(keys[0]).asc(nulls_last=True)
    return qs.order_by(first, *keys[1:], "pk")


def _has_counters(port) -> bool:
    try:
        port.counters  # noqa: B018
    except Port.counters.RelatedObjectDoesNotExist:
        return False
    return True


def row_values(port: Port, norm: Norm | None = None) -> dict:
    """One port row as plain values (what the page, the CSV and the API show): bytes/s, 0..1
    fractions, ticks/s, counter totals (error deltas as ``{counter: delta}``); ``below`` is True
    for a linked port slower than ``norm`` (False without one)."""
    remote = port.remote
    counters = port.counters if _has_counters(port) else None
    node = port.node
    return {
        "id": port.pk,
        "node": str(node),
        "node_id": node.pk,
        "node_guid": node.node_guid,
        "node_type": node.node_type,
        "tier": node.get_tier_display(),
        "port": port.port_num,
        "peer": f"{remote.node} [{remote.port_num}]" if remote is not None else "",
        "peer_port_id": remote.pk if remote is not None else None,
        "state": port.get_state_display(),
        "state_value": port.state,
        "phys_state": port.get_phys_state_display(),
        "width": port.width,
        "speed": port.speed,
        "rate_gbps": port.rate_gbps,
        "lid": port.lid_any,
        "xmit_bytes_per_s": counters.xmit_bytes_per_s if counters else None,
        "rcv_bytes_per_s": counters.rcv_bytes_per_s if counters else None,
        "utilisation": counters.utilisation if counters else None,
        "congestion": counters.congestion if counters else None,
        "xmit_wait_per_s": counters.xmit_wait_per_s if counters else None,
        "error_deltas": (counters.error_deltas or {}) if counters else {},
        "error_total": port.error_total,
        "stale": bool(counters and counters.stale),
        "stale_reason": counters.stale_reason if counters else "never swept",
        "below": bool(
            norm
            and norm.rate_gbps
            and remote is not None
            and port.rate_gbps is not None
            and port.rate_gbps < norm.rate_gbps
        ),
        "vendor": node.vendor_name,
        "device": node.device_name,
    }


CSV_COLUMNS = (
    "node",
    "node_guid",
    "node_type",
    "tier",
    "port",
    "peer",
    "state",
    "phys_state",
    "width",
    "speed",
    "rate_gbps",
    "lid",
    "xmit_bytes_per_s",
    "rcv_bytes_per_s",
    "utilisation",
    "congestion",
    "xmit_wait_per_s",
    "error_deltas",
    "error_total",
    "stale_reason",
    "vendor",
    "device",
)


def csv_cell(value) -> str:
    """One cell of the ports CSV: "" for None, ``k=v`` pairs for a dict of error counters, floats
    to 6 significant digits, text made spreadsheet-safe (``core.csvcells``)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return spreadsheet_safe(" ".join(f"{k}={v}" for k, v in sorted(value.items())))
    if isinstance(value, bool | int | float):
        return f"{value:.6g}" if isinstance(value, float) else str(value)
    return spreadsheet_safe(str(value))
