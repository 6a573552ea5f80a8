"""Prometheus ``/metrics``: port counters, rates and poller health, read from the database.

A custom collector (``prometheus_client`` ``Collector``) builds every family on scrape from the
latest ``PortCounters`` and ``Sweep`` rows, so any Weft process (web, worker) serves the same
numbers and nothing lives in process-global state.

Per-port labels: ``fabric``, ``node_guid``, ``port``, ``node_desc``, ``remote_guid``, ``remote_port``,
``remote_desc`` (remote labels empty for an unlinked port). Counter families (``_total``):
``weft_port_xmit_bytes`` / ``weft_port_rcv_bytes`` (bytes = data words × 4),
``weft_port_xmit_packets`` / ``weft_port_rcv_packets``, ``weft_port_xmit_wait_ticks`` (PortXmitWait)
and one per error counter (``weft_port_symbol_errors_total``...). These are the device counters as
read (they may reset; Prometheus' ``rate()`` handles resets). Gauges: ``weft_port_*_per_second``,
``weft_port_utilisation_ratio``, ``weft_port_congestion_ratio``, ``weft_port_stale``. Poller health
per fabric: ``weft_sweep_duration_seconds``, ``weft_sweep_ports``, ``weft_sweep_stale_ports``,
``weft_sweep_saturated_ports``, ``weft_sweep_saturated_counters``, ``weft_sweep_resets``, ``weft_sweep_age_seconds``,
``weft_sweep_ok`` (1 ok, 0.5 partial, 0 failed or skipped: a fabric not discovered yet has no
ports to read, which is not a healthy poller).

Access: ``Authorization: Bearer <token>`` with a token of ``settings.WEFT_METRICS_TOKENS``, or a
client address in ``settings.WEFT_METRICS_ALLOW`` (addresses or CIDR networks) on a direct request
(one relayed by a reverse proxy, with ``X-Forwarded-For``/``Forwarded``/``X-Real-IP``, needs the
token: behind a proxy every client has the proxy's address); 403 otherwise.
URL: ``path("metrics", telemetry.metrics.metrics_view)`` in ``weft/urls.py``.
"""

from __future__ import annotations

import hmac
import ipaddress
import time
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder

from .models import RAW_COUNTERS, PortCounters, Sweep
from .semantics import DERIVED_FIELDS

# Headers a reverse proxy adds; a request carrying one is not allowed by address (see _client_allowed).
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")

#: ``node_desc``/``remote_desc`` carry the node's name as admins see it (``Node.name``: its
#: node-name map entry, else the trimmed description); the label names stay for dashboards.
PORT_LABELS = ["fabric", "node_guid", "port", "node_desc", "remote_guid", "remote_port", "remote_desc"]

#: Metric name, help and scale of the rate counters; an error counter is exported under its field name.
_RATE_COUNTER_METRICS = {
    "xmit_data": ("weft_port_xmit_bytes", "Bytes transmitted (PortXmitData x 4)", 4),
    "rcv_data": ("weft_port_rcv_bytes", "Bytes received (PortRcvData x 4)", 4),
    "xmit_pkts": ("weft_port_xmit_packets", "Packets transmitted (PortXmitPkts)", 1),
    "rcv_pkts": ("weft_port_rcv_packets", "Packets received (PortRcvPkts)", 1),
    "xmit_wait": ("weft_port_xmit_wait_ticks", "Ticks with data to send but none sent (PortXmitWait)", 1),
}
#: ``(field, metric name, help, scale)`` of every raw counter, in ``RAW_COUNTERS`` order.
_COUNTERS = [
    (name, *_RATE_COUNTER_METRICS[name])
    if name in _RATE_COUNTER_METRICS
    else (name, f"weft_port_{name}", f"{name.replace('_', ' ')} (PortCounters)", 1)
    for name in RAW_COUNTERS
]

#: Metric name and help of each derived value.
_DERIVED_METRICS = {
    "xmit_bytes_per_s": (
        "weft_port_xmit_bytes_per_second",
        "Transmit rate over the last sweep interval, bytes/s",
    ),
    "rcv_bytes_per_s": (
        "weft_port_rcv_bytes_per_second",
        "Receive rate over the last sweep interval, bytes/s",
    ),
    "xmit_pkts_per_s": ("weft_port_xmit_packets_per_second", "Transmit packets/s over the last interval"),
    "rcv_pkts_per_s": ("weft_port_rcv_packets_per_second", "Receive packets/s over the last interval"),
    "xmit_wait_per_s": (
        "weft_port_xmit_wait_ticks_per_second",
        "PortXmitWait ticks/s over the last interval",
    ),
    "utilisation": ("weft_port_utilisation_ratio", "max(xmit, rcv) rate / link data rate (0..1)"),
    "congestion": (
        "weft_port_congestion_ratio",
        "Congestion index: fraction of time waiting to transmit (0..1)",
    ),
}
#: ``(field, metric name, help)`` of every derived value, in ``DERIVED_FIELDS`` order.
_GAUGES = [(name, *_DERIVED_METRICS[name]) for name in DERIVED_FIELDS]


class WeftCollector:
    """Collector of port counters and sweep health from the database (one query per table)."""

    def __init__(self, fabric_id: int | None = None) -> None:
        self.fabric_id = fabric_id

    def describe(self) -> list:
        return []  # no describe-time DB access (registration must not query)

    def collect(self) -> Iterator:
        from fabric.models import Fabric, Link

        fabrics = dict(Fabric.objects.values_list("id", "name"))
        if self.fabric_id is not None:
            fabrics = {k: v for k, v in fabrics.items() if k == self.fabric_id}
        counters = {
            m: CounterMetricFamily(name, doc, labels=PORT_LABELS)
            for f, name, doc, _ in _COUNTERS
            for m in [f]
        }
        gauges = {f: GaugeMetricFamily(name, doc, labels=PORT_LABELS) for f, name, doc in _GAUGES}
        stale = GaugeMetricFamily(
            "weft_port_stale", "1 when the last sweep could not read the port", labels=PORT_LABELS
        )

        peer: dict[int, int] = {}
        links = Link.objects.filter(fabric_id__in=list(fabrics)).values_list("port_a_id", "port_b_id")
        for a, b in links:
            peer[a], peer[b] = b, a
        fields = [f for f, *_ in _COUNTERS] + [f for f, *_ in _GAUGES]
        rows = PortCounters.objects.filter(port__node__fabric_id__in=list(fabrics)).values_list(
            "port_id",
            "port__port_num",
            "port__node__node_guid",
            "port__node__name",
            "port__node__fabric_id",
            "stale",
            *fields,
        )
        rows = list(rows)
        ident = {r[0]: (r[2], str(r[1]), r[3]) for r in rows}
        missing = [peer[r[0]] for r in rows if r[0] in peer and peer[r[0]] not in ident]
        if missing:
            from fabric.models import Port

            for pid, num, guid, desc in Port.objects.filter(pk__in=missing).values_list(
                "id", "port_num", "node__node_guid", "node__name"
            ):
                ident[pid] = (guid, str(num), desc)
        n_counters = len(_COUNTERS)
        for r in rows:
            pid, _num, guid, desc, fid = r[0], r[1], r[2], r[3], r[4]
            remote = ident.get(peer.get(pid), ("", "", ""))
            labels = [fabrics[fid], guid, str(r[1]), desc, remote[0], remote[1], remote[2]]
            values = r[6:]
            for i, (f, _name, _doc, scale) in enumerate(_COUNTERS):
                v = values[i]
                if v is not None:
                    counters[f].add_metric(labels, v * scale)
            for j, (f, _name, _doc) in enumerate(_GAUGES):
                v = values[n_counters + j]
                if v is not None:
                    gauges[f].add_metric(labels, v)
            stale.add_metric(labels, 1.0 if r[5] else 0.0)
        yield from counters.values()
        yield from gauges.values()
        yield stale
        yield from self._health(fabrics)

    def _health(self, fabrics: dict[int, str]) -> Iterator:
        health = {
            "duration_s": GaugeMetricFamily(
                "weft_sweep_duration_seconds", "Duration of the last sweep", labels=["fabric"]
            ),
            "ports": GaugeMetricFamily("weft_sweep_ports", "Ports read by the last sweep", labels=["fabric"]),
            "stale": GaugeMetricFamily(
                "weft_sweep_stale_ports", "Ports the last sweep could not read", labels=["fabric"]
            ),
            "saturated_ports": GaugeMetricFamily(
                "weft_sweep_saturated_ports", "Ports with a counter at its maximum", labels=["fabric"]
            ),
            "saturated": GaugeMetricFamily(
                "weft_sweep_saturated_counters", "Counters at their maximum (all ports)", labels=["fabric"]
            ),
            "resets": GaugeMetricFamily(
                "weft_sweep_resets", "Ports whose counters went down", labels=["fabric"]
            ),
        }
        age = GaugeMetricFamily(
            "weft_sweep_age_seconds", "Seconds since the last sweep started", labels=["fabric"]
        )
        ok = GaugeMetricFamily(
            "weft_sweep_ok", "1 ok, 0.5 partial, 0 failed or skipped (last sweep)", labels=["fabric"]
        )
        interval = GaugeMetricFamily(
            "weft_sweep_interval_seconds", "Seconds between the last two sweeps", labels=["fabric"]
        )
        now = time.time()
        for fid, name in fabrics.items():
            s = Sweep.objects.filter(fabric_id=fid).order_by("-started", "-id").first()
            if s is None:
                continue
            for key, fam in health.items():
                value = getattr(s, key)
                if value is not None:
                    fam.add_metric([name], float(value))
            age.add_metric([name], max(0.0, now - s.started.timestamp()))
            ok.add_metric([name], {"ok": 1.0, "partial": 0.5}.get(s.status, 0.0))
            if s.interval_s is not None:
                interval.add_metric([name], s.interval_s)
        yield from health.values()
        yield age
        yield ok
        yield interval


#: Collector factories of other apps (``factory(fabric_id) -> Collector``), registered from their
#: ``AppConfig.ready()`` with :func:`register_collector` (the devices app's SNMP families): one
#: ``/metrics`` for every source, without this app importing them.
_EXTRA: list = []


def register_collector(factory) -> None:
    """Add ``factory(fabric_id)`` (a ``prometheus_client`` collector, ``fabric_id`` None for all
    fabrics) to every ``/metrics`` answer. Registering the same factory again is a no-op."""
    if factory not in _EXTRA:
        _EXTRA.append(factory)


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


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve the Prometheus exposition (text 0.0.4, or OpenMetrics when the scraper asks for it).

    ``?fabric=NAME`` limits the output to one fabric. 403 without a valid bearer token or an allowed
    client address; 404 for an unknown fabric.
    """
    if not _client_allowed(request):
        return HttpResponse(
            "forbidden: bearer token or allowed address required\n", status=403, content_type="text/plain"
        )
    fabric_id = None
    if name := request.GET.get("fabric"):
        from fabric.models import Fabric

        fabric_id = (  # a NUL cannot be in a name, and PostgreSQL refuses it in a query (a 500)
            None if "\x00" in name else Fabric.objects.filter(name=name).values_list("id", flat=True).first()
        )
        if fabric_id is None:
            return HttpResponse(f"no fabric {name!r}\n", status=404, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(WeftCollector(fabric_id))
    for factory in _EXTRA:
        registry.register(factory(fabric_id))
    encoder, content_type = choose_encoder(request.META.get("HTTP_ACCEPT", ""))
    return HttpResponse(encoder(registry), content_type=content_type)
