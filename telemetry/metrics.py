"""Prometheus ``/metrics``: port counters, port descriptions and poller health, read from the database.

The exposition (text format 0.0.4) is built directly from rows (``values_list``, no model
instances): the counters are read from ``PortCounters`` (the sweep's one store of the latest
values) on each scrape, so any Weft process (web, worker) serves the same numbers; only the ports'
labels are kept per process until the fabric's topology changes (:data:`_TOPOLOGY`). The layout follows Prometheus' naming and instrumentation guidelines
(prometheus.io/docs/practices/naming, /instrumentation: "counters end in ``_total``", "rates are
computed at query time with ``rate()``", "use an ``_info`` metric for labels that would otherwise
be repeated on every series") and the InfiniBand exporters (treydock/infiniband_exporter: the
device counters as ``_total`` counters, one series per port and counter):

* Every per-port series carries only the port's identity: ``fabric``, ``guid`` (node GUID, 0x + 16
  hex digits) and ``port`` (port number).
* ``weft_port_info{fabric,guid,port,node_desc,remote_guid,remote_port,remote_desc,width,speed} 1``:
  one per polled port, the descriptive labels (``node_desc``/``remote_desc`` are the node's name as
  admins see it, ``Node.name``: its node-name map entry, else the trimmed NodeDescription; remote
  labels empty for an unlinked port; ``width``/``speed`` the active link width and lane speed).
  Join it with ``* on (fabric, guid, port) group_left (node_desc, ...) weft_port_info``.
* ``weft_link_data_rate_bytes_per_second{fabric,width,speed}``: the data rate of each width/speed
  pair in use (``fabric.rates``; 4x HDR = 25e9), for utilisation in PromQL.
* Traffic counters (``_total``, as read; they may reset, ``rate()`` handles resets):
  ``weft_port_xmit_bytes_total`` / ``weft_port_rcv_bytes_total`` (bytes = PortXmitData/PortRcvData
  data words × 4, IBTA Vol 1 ch. 16.1), ``weft_port_xmit_packets_total`` / ``weft_port_rcv_packets_total``,
  ``weft_port_xmit_wait_ticks_total`` (PortXmitWait). ``weft_port_xmit_wait_tick_seconds{fabric}``
  is the tick length Weft assumes (``WEFT_XMIT_WAIT_TICK_NS``), so the congestion index is
  ``rate(weft_port_xmit_wait_ticks_total[i]) * on (fabric) group_left weft_port_xmit_wait_tick_seconds``.
* Error counters: ``weft_port_errors_total`` (every read port: the sum of its 11 error counters, so
  ``increase()`` sees the first error of a port) and one family per error counter
  (``weft_port_symbol_errors_total``, ``weft_port_link_downed_total``, ...) carrying only the
  ports where that counter is not zero (a Selene-size fabric is mostly error-free: 11 zero series
  per port would double the body).
* ``weft_port_stale{fabric,guid,port} 1`` for each port the last sweep could not read; such a port
  has no counter series (its last values are old: Prometheus marks the series stale), only its info.
* Poller health per fabric: ``weft_sweep_duration_seconds``, ``weft_sweep_ports``,
  ``weft_sweep_stale_ports``, ``weft_sweep_saturated_ports``, ``weft_sweep_saturated_counters``,
  ``weft_sweep_resets``, ``weft_sweep_age_seconds``, ``weft_sweep_interval_seconds``,
  ``weft_sweep_ok`` (1 ok, 0.5 partial, 0 failed or skipped: a fabric not discovered yet has no
  ports to read, which is not a healthy poller).

The per-second rates, ``utilisation`` and ``congestion`` Weft stores (``PortCounters``) are not
exported per port: PromQL derives them (README "Prometheus" has the old name → new expression table).

Scrape-time selection: ``?fabric=NAME`` (repeatable) limits the answer to those fabrics;
``collect[]=GROUP`` (repeatable) to those groups (:data:`GROUPS`: ``info``, ``traffic``, ``errors``,
``sweep``, plus one per registered collector, e.g. ``devices``) or to single metric families by
name; without ``collect[]`` everything is served. A site splits a huge fabric over scrape jobs with
them. ``Accept-Encoding: gzip`` gets a gzip body.

Access: ``Authorization: Bearer <token>`` with a token of ``settings.WEFT_METRICS_TOKENS``, or a
client address in ``settings.WEFT_METRICS_ALLOW`` (addresses or CIDR networks) on a direct request
(one relayed by a reverse proxy, with ``X-Forwarded-For``/``Forwarded``/``X-Real-IP``, needs the
token: behind a proxy every client has the proxy's address); 403 otherwise.
URL: ``path("metrics", telemetry.metrics.metrics_view)`` in ``weft/urls.py``.
"""

from __future__ import annotations

import gzip
import hmac
import ipaddress
import time
from collections.abc import Iterable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from .models import PortCounters, Sweep
from .semantics import ERROR_COUNTERS, RATE_COUNTERS

# Headers a reverse proxy adds; a request carrying one is not allowed by address (see _client_allowed).
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: zlib level of a gzip answer: 1 compresses the Selene-size body (20 MB) to 2.2 MB in a quarter of
#: the time of zlib's default 6 (1.9 MB), which alone took most of the 1.5 s budget (bench/metrics.py).
GZIP_LEVEL = 1

#: Labels of ``weft_port_info`` after the identity (``fabric``, ``guid``, ``port``).
INFO_LABELS = ("node_desc", "remote_guid", "remote_port", "remote_desc", "width", "speed")

#: ``field: (metric name, help, scale)`` of the traffic counters, in ``RATE_COUNTERS`` order.
TRAFFIC = {
    "xmit_data": ("weft_port_xmit_bytes_total", "Bytes transmitted (PortXmitData x 4)", 4),
    "rcv_data": ("weft_port_rcv_bytes_total", "Bytes received (PortRcvData x 4)", 4),
    "xmit_pkts": ("weft_port_xmit_packets_total", "Packets transmitted (PortXmitPkts)", 1),
    "rcv_pkts": ("weft_port_rcv_packets_total", "Packets received (PortRcvPkts)", 1),
    "xmit_wait": (
        "weft_port_xmit_wait_ticks_total",
        "Ticks with data to send but none sent (PortXmitWait)",
        1,
    ),
}
assert tuple(TRAFFIC) == RATE_COUNTERS

#: ``field: metric name`` of the error counters (sparse: only non-zero values are exported).
ERRORS = {name: f"weft_port_{name}_total" for name in ERROR_COUNTERS}

_SWEEP_FAMILIES = (  # (Sweep field, metric name, help)
    ("duration_s", "weft_sweep_duration_seconds", "Duration of the last sweep"),
    ("ports", "weft_sweep_ports", "Ports read by the last sweep"),
    ("stale", "weft_sweep_stale_ports", "Ports the last sweep could not read"),
    ("saturated_ports", "weft_sweep_saturated_ports", "Ports with a counter at its maximum"),
    ("saturated", "weft_sweep_saturated_counters", "Counters at their maximum (all ports)"),
    ("resets", "weft_sweep_resets", "Ports whose counters went down"),
)

#: Metric families of each ``collect[]`` group of this module (registered collectors add theirs).
GROUPS: dict[str, tuple[str, ...]] = {
    "info": ("weft_port_info", "weft_link_data_rate_bytes_per_second"),
    "traffic": (*(m for m, _h, _s in TRAFFIC.values()), "weft_port_xmit_wait_tick_seconds"),
    "errors": ("weft_port_errors_total", *ERRORS.values()),
    "sweep": (
        *(m for _f, m, _h in _SWEEP_FAMILIES),
        "weft_sweep_age_seconds",
        "weft_sweep_ok",
        "weft_sweep_interval_seconds",
        "weft_port_stale",
    ),
}


def escape(value: str) -> str:
    """A label value escaped for the text format (backslash, double quote, line feed)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def _num(v: float) -> str:
    """A sample value: integers without a fraction (``4000``), floats as Python's shortest repr."""
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


class Selection:
    """What one scrape asks for: ``groups`` (names of :data:`GROUPS` and registered collectors) and
    single ``families`` (metric names); both empty = everything."""

    def __init__(self, collect: Iterable[str] = ()) -> None:
        self.groups: set[str] = set()
        self.families: set[str] = set()
        known_groups = set(GROUPS) | set(_EXTRA.values())
        known_families = {f for fams in GROUPS.values() for f in fams}
        bad = []
        for item in collect:
            if item in known_groups:
                self.groups.add(item)
            elif item in known_families:
                self.families.add(item)
            else:
                bad.append(item)
        if bad:
            raise ValueError(
                f"unknown collect[] {', '.join(map(repr, bad))}: groups are {', '.join(sorted(known_groups))} "
                "or a metric family name of them"
            )
        self.everything = not self.groups and not self.families

    def group(self, name: str) -> bool:
        """True when anything of group ``name`` is wanted."""
        return self.everything or name in self.groups or any(f in self.families for f in GROUPS.get(name, ()))

    def family(self, group: str, name: str) -> bool:
        """True when metric family ``name`` of ``group`` is wanted."""
        return self.everything or group in self.groups or name in self.families


def _family(out: list[str], name: str, kind: str, doc: str) -> None:
    out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")


#: ``{fabric id: (stamp, {port id: (identity labels, weft_port_info line)}, {(width, speed): Gb/s})}``
#: of this process: what a scrape needs of the fabric's topology, kept until the fabric's stamp
#: (name, creation time, ``last_discovery``, ``node_name_map_changed``) changes, at most
#: :data:`TOPOLOGY_MAX_AGE_S`. Every topology writer records a Discovery
#: (``fabric.services.ingest.common.became_latest``) and a node-name map edit stamps
#: ``node_name_map_changed``; widths, speeds, names and links change only through them (the age
#: bound covers a hand edit of the database).
_TOPOLOGY: dict[int, tuple[tuple, dict[int, tuple[str, str]], dict[tuple[str, str], float]]] = {}
TOPOLOGY_MAX_AGE_S = 300.0


def _build_topology(fid: int, name: str) -> tuple[dict[int, tuple[str, str]], dict[tuple[str, str], float]]:
    from fabric.models import Link, Port

    ports = {
        r[0]: r[1:]
        for r in Port.objects.filter(node__fabric_id=fid)
        .order_by()
        .values_list("id", "node__node_guid", "port_num", "node__name", "width", "speed", "rate_gbps")
    }
    peer: dict[int, int] = {}
    for a, b in Link.objects.filter(fabric_id=fid).values_list("port_a_id", "port_b_id"):
        peer[a], peer[b] = b, a
    fabric = escape(name)
    texts: dict[int, tuple[str, str]] = {}
    rates: dict[tuple[str, str], float] = {}
    for pid, (guid, num, desc, width, speed, gbps) in ports.items():
        ident = f'fabric="{fabric}",guid="{guid}",port="{num}"'
        remote = ports.get(peer.get(pid))
        rg, rp, rd = (remote[0], remote[1], escape(remote[2])) if remote else ("", "", "")
        texts[pid] = (
            ident,
            f'weft_port_info{{{ident},node_desc="{escape(desc)}",remote_guid="{rg}",remote_port="{rp}",'
            f'remote_desc="{rd}",width="{escape(width)}",speed="{escape(speed)}"}} 1\n',
        )
        if width and speed and gbps:
            rates[(width, speed)] = max(rates.get((width, speed), 0.0), gbps)
    return texts, rates


def _topology(ids: list[int]) -> tuple[dict[int, tuple[str, str]], dict[tuple[int, str, str], float]]:
    """``{port id: (identity labels, info line)}`` and ``{(fabric id, width, speed): Gb/s}`` of the
    fabrics' ports, from :data:`_TOPOLOGY` or built (two queries per fabric whose stamp changed)."""
    from fabric.models import Fabric

    texts: dict[int, tuple[str, str]] = {}
    rates: dict[tuple[int, str, str], float] = {}
    now = time.monotonic()
    for fid, *fields in Fabric.objects.filter(pk__in=ids).values_list(
        "id", "name", "created", "last_discovery_id", "node_name_map_changed"
    ):
        hit = _TOPOLOGY.get(fid)
        if hit is None or hit[0][:-1] != tuple(fields) or now - hit[0][-1] > TOPOLOGY_MAX_AGE_S:
            hit = _TOPOLOGY[fid] = ((*fields, now), *_build_topology(fid, fields[0]))
        texts.update(hit[1])
        rates.update({(fid, *k): v for k, v in hit[2].items()})
    return texts, rates


def render(fabrics: dict[int, str], sel: Selection | None = None) -> str:
    """The exposition text of Weft's own families for ``fabrics`` (``{fabric id: name}``).

    One query for the counters (``values_list`` rows), the ports' labels from :func:`_topology`
    (cached per process until the fabric's topology changes), one query per fabric for its last
    sweep; the text is built from tuples in one pass per family. Raises nothing for missing data:
    a family with no samples keeps its HELP/TYPE lines.
    """
    sel = sel or Selection()
    out: list[str] = []
    ids = list(fabrics)
    want_ports = any(sel.group(g) for g in ("info", "traffic", "errors", "sweep"))
    rows: list[tuple] = []
    texts: dict[int, tuple[str, str]] = {}
    rates: dict[tuple[int, str, str], float] = {}
    if want_ports and ids:
        counter_fields = (*TRAFFIC, *ERRORS) if sel.group("traffic") or sel.group("errors") else ()
        rows = list(
            PortCounters.objects.filter(port__node__fabric_id__in=ids)
            .order_by()  # no sort: 25,000 rows sorted spilled to disk (work_mem) for no reader's need
            .values_list("port_id", "stale", *counter_fields)
        )
        texts, rates = _topology(ids)
        if any(r[0] not in texts for r in rows):  # a port newer than the stamp: build again
            for fid in ids:
                _TOPOLOGY.pop(fid, None)
            texts, rates = _topology(ids)
            rows = [r for r in rows if r[0] in texts]
    ident = {r[0]: texts[r[0]][0] for r in rows}
    if sel.group("info"):
        name = "weft_port_info"
        if sel.family("info", name):
            _family(
                out,
                name,
                "gauge",
                "Descriptive labels of a polled port (value 1); join on fabric, guid, port",
            )
            out.extend(texts[r[0]][1] for r in rows)
        name = "weft_link_data_rate_bytes_per_second"
        if sel.family("info", name):
            _family(out, name, "gauge", "Data rate of a link width and lane speed (fabric.rates), bytes/s")
            for (fid, width, speed), gbps in sorted(rates.items()):
                out.append(
                    f'{name}{{fabric="{escape(fabrics[fid])}",width="{escape(width)}",speed="{escape(speed)}"}} '
                    f"{_num(gbps * 1e9 / 8)}\n"
                )
    n_traffic = len(TRAFFIC)
    live = [r for r in rows if not r[1]]
    if sel.group("traffic"):
        for i, (name, doc, scale) in enumerate(TRAFFIC.values()):
            if not sel.family("traffic", name):
                continue
            _family(out, name, "counter", doc)
            col = 2 + i
            if scale == 1:
                out.extend(f"{name}{{{ident[r[0]]}}} {r[col]}\n" for r in live if r[col] is not None)
            else:
                out.extend(f"{name}{{{ident[r[0]]}}} {r[col] * scale}\n" for r in live if r[col] is not None)
        name = "weft_port_xmit_wait_tick_seconds"
        if sel.family("traffic", name):
            _family(
                out, name, "gauge", "PortXmitWait tick length Weft assumes (WEFT_XMIT_WAIT_TICK_NS), seconds"
            )
            tick = _num(settings.WEFT_XMIT_WAIT_TICK_NS / 1e9)
            out.extend(f'{name}{{fabric="{escape(n)}"}} {tick}\n' for n in fabrics.values())
    if sel.group("errors"):
        first = 2 + n_traffic
        name = "weft_port_errors_total"
        if sel.family("errors", name):
            _family(out, name, "counter", "Sum of the port's error counters (IBTA PortCounters)")
            for r in live:
                vals = [v for v in r[first:] if v is not None]
                if vals:
                    out.append(f"{name}{{{ident[r[0]]}}} {sum(vals)}\n")
        for j, (field, name) in enumerate(ERRORS.items()):
            if not sel.family("errors", name):
                continue
            _family(
                out, name, "counter", f"{field.replace('_', ' ')} (PortCounters; ports where it is not 0)"
            )
            col = first + j
            out.extend(f"{name}{{{ident[r[0]]}}} {r[col]}\n" for r in live if r[col])
    if sel.group("sweep"):
        _render_sweeps(out, sel, fabrics)
        name = "weft_port_stale"
        if sel.family("sweep", name):
            _family(out, name, "gauge", "1 for each port the last sweep could not read (others absent)")
            out.extend(f"{name}{{{ident[r[0]]}}} 1\n" for r in rows if r[1])
    return "".join(out)


def _render_sweeps(out: list[str], sel: Selection, fabrics: dict[int, str]) -> None:
    now = time.time()
    last = {}
    for fid in fabrics:
        s = Sweep.objects.filter(fabric_id=fid).order_by("-started", "-id").first()
        if s is not None:
            last[fid] = s

    def family(name: str, doc: str, value) -> None:
        if not sel.family("sweep", name):
            return
        _family(out, name, "gauge", doc)
        for fid, s in last.items():
            v = value(s)
            if v is not None:
                out.append(f'{name}{{fabric="{escape(fabrics[fid])}"}} {_num(float(v))}\n')

    for field, name, doc in _SWEEP_FAMILIES:
        family(name, doc, lambda s, f=field: getattr(s, f))
    family("weft_sweep_age_seconds", "Seconds since the last sweep started",
           lambda s: max(0.0, now - s.started.timestamp()))  # fmt: skip
    family("weft_sweep_ok", "1 ok, 0.5 partial, 0 failed or skipped (last sweep)",
           lambda s: {"ok": 1.0, "partial": 0.5}.get(s.status, 0.0))  # fmt: skip
    family("weft_sweep_interval_seconds", "Seconds between the last two sweeps", lambda s: s.interval_s)


#: Collector factories of other apps (``factory(fabric_id) -> Collector``) and their ``collect[]``
#: group, registered from their ``AppConfig.ready()`` with :func:`register_collector` (the devices
#: app's SNMP families): one ``/metrics`` for every source, without this app importing them.
_EXTRA: dict = {}


def register_collector(factory, group: str | None = None) -> None:
    """Add ``factory(fabric_id)`` (a ``prometheus_client`` collector, ``fabric_id`` None for all
    fabrics) to every ``/metrics`` answer, selectable as ``collect[]=group`` (default: the top-level
    package of the factory, e.g. ``devices``). Registering the same factory again is a no-op."""
    _EXTRA.setdefault(factory, group or factory.__module__.split(".")[0])


class _OnlyFabrics:
    """A registered collector's families keeping the samples of ``names`` (all when None; a sample
    without a ``fabric`` label, e.g. the trap receiver's, is kept)."""

    def __init__(self, collector, names: set[str] | None) -> None:
        self.collector, self.names = collector, names

    def describe(self) -> list:
        return []

    def collect(self):
        for fam in self.collector.collect():
            if self.names is not None:
                fam.samples = [s for s in fam.samples if s.labels.get("fabric", None) in self.names | {None}]
            yield fam


def _client_allowed(request: HttpRequest) -> bool:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    tokens = [t for t in settings.WEFT_METRICS_TOKENS if t]
    if header.startswith("Bearer ") and tokens:
        given = header[len("Bearer ") :].strip().encode()
        if any(hmac.compare_digest(given, t.encode()) for t in tokens):
            return True
    if any(request.META.get(h) for h in PROXY_HEADERS):
        # Relayed by a reverse proxy: REMOTE_ADDR is the proxy's (127.0.0.1 in the documented
        # deployment), not the client's, so the address allow-list cannot apply: token only.
        return False
    addr = request.META.get("REMOTE_ADDR", "")
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    for entry in settings.WEFT_METRICS_ALLOW:
        try:
            if ip in ipaddress.ip_network(entry.strip(), strict=False):
                return True
        except ValueError:
            continue
    return False


def accepts_gzip(header: str) -> bool:
    """True when an ``Accept-Encoding`` value (RFC 9110 §12.5.3) accepts ``gzip`` (or ``*``) with q > 0."""
    star = None
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        coding = coding.strip().lower()
        q = 1.0
        for p in params.split(";"):
            k, _, v = p.strip().partition("=")
            if k.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        if coding in ("gzip", "x-gzip"):
            return q > 0
        if coding == "*":
            star = q > 0
    return bool(star)


def _text(status: int, message: str) -> HttpResponse:
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve the Prometheus exposition (text format 0.0.4), gzip-compressed when the client accepts it.
    ``HEAD`` (an uptime check) answers the same status and headers with no body and renders nothing.

    ``?fabric=NAME`` (repeatable) limits the output to those fabrics, ``collect[]=GROUP|FAMILY``
    (repeatable) to those groups or metric families (see the module docstring). 403 without a
    valid bearer token or an allowed client address; 404 for an unknown fabric; 400 for an unknown
    ``collect[]`` value (the answer lists the valid ones).
    """
    if not _client_allowed(request):
        return _text(403, "forbidden: bearer token or allowed address required\n")
    from fabric.models import Fabric

    try:
        sel = Selection(request.GET.getlist("collect[]"))
    except ValueError as exc:
        return _text(400, f"{exc}\n")
    fabrics = dict(Fabric.objects.order_by("name").values_list("id", "name"))
    names = [n for n in request.GET.getlist("fabric") if n]  # "?fabric=" alone: every fabric, as before
    if names:
        by_name = {v: k for k, v in fabrics.items()}
        for name in names:
            # a NUL cannot be in a name (and PostgreSQL refuses it in a query): never looked up
            if name not in by_name:
                return _text(404, f"no fabric {name!r}\n")
        fabrics = {by_name[n]: n for n in names}
    if request.method == "HEAD":
        resp = HttpResponse(content_type=CONTENT_TYPE)
        resp["Vary"] = "Accept-Encoding"
        return resp
    body = render(fabrics, sel)
    extra = [(f, g) for f, g in _EXTRA.items() if sel.everything or g in sel.groups]
    data = body.encode()
    if extra:
        registry = CollectorRegistry(auto_describe=False)
        for factory, _group in extra:
            if len(fabrics) == 1 and names:
                registry.register(factory(next(iter(fabrics))))
            else:
                registry.register(_OnlyFabrics(factory(None), set(fabrics.values()) if names else None))
        data += generate_latest(registry)
    resp = HttpResponse(content_type=CONTENT_TYPE)
    resp["Vary"] = "Accept-Encoding"
    if accepts_gzip(request.META.get("HTTP_ACCEPT_ENCODING", "")):
        data = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
        resp["Content-Encoding"] = "gzip"
    resp.content = data
    return resp
