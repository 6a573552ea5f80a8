"""The per-job fabric view (issue 12, "Per-job fabric view"): what the fabric did for one job.

A job's *links* are

* its hosts' **HCA links**: every cabled port of a CA node of a host the job was given (the host
  rows of its allocation's GPUs; ``Job.placement``'s names when it has none), near end the HCA
  port, far end the leaf port it is cabled to;
* its units' **uplinks**: the ``fabric.Link`` rows from the job's units' leaf (or rail-leaf)
  switches to the next tier (``scheduler.locality.Domain.uplinks``, the links the queue's
  congestion check reads), near end the leaf port, far end the spine port; ``job_leaf`` marks
  those of the leaves the job's own HCAs are cabled to (a rail group's unit spans leaves a small
  job does not use).

Over the job's lifetime (``started_at``, else ``placed_at``, until ``ended_at``, else now) every
link's history is read from the stored telemetry with ``telemetry.services.history.ports_series``
(the one reader of ``CounterChunk``; rates are the sweep's, utilisation and congestion derived
there from the link rate and the PortXmitWait tick). Directions are always the near end's:
``xmit`` = out of the near end (host → leaf on an HCA link, leaf → spine on an uplink), ``rcv`` =
into it.

Which end's counters give a link's traffic (``traffic_end``):

* an **HCA link** reads the switch end of the cable, the leaf port facing the HCA, with the
  directions swapped (HCA xmit = leaf port rcv, HCA rcv = leaf port xmit), and the leaf port's
  utilisation. The sweep (``telemetry.services.sweep``) reads CA ports too, but what their
  counters hold depends on the host (a host that resets or virtualises its HCA counters, an HCA
  that does not count PortXmitData) while the switch port is the fabric's own; the lab's
  traffic player (``lab.traffic``) and a PerfMgr configured for switch ports only write or read
  the switch ports, so there the HCA end is flat (zero rates) while the cable carries GB/s.
  When the leaf port has no rate in the window (never swept, no link row to it), the HCA end's
  own series is read instead.
* an **uplink** reads its near (leaf) end, both ends being switch ports; the spine end, swapped
  likewise, when the leaf end has no rate in the window.

"Has a rate" = at least one non-None ``xmit_bytes_per_s`` in the window (a stale or never-read
port has none). The series' time steps are the read end's.

Congestion is per direction, from PortXmitWait (a port waits to *send*): ``congestion_near`` is the
near end's (HCA → leaf on an HCA link, leaf → spine on an uplink), ``congestion_far`` the far
end's, i.e. the congestion *towards* the near end (the leaf port's PortXmitWait toward the HCA is
the HCA-bound congestion: an incast into a host shows there), ``congestion`` the worse of the two
per time step; both ends are read whichever end gives the traffic. Nothing is recomputed: this
module only aligns, swaps, sums and takes maxima of what the history returns.

The alarms are those of the window (first seen before its end, not cleared before its start) on
any of the job's CA nodes (by row or, once gone from the fabric, by GUID and by the host its
``node.removed`` names), the units' leaf switches, any port of its links (both ends), one of its
links (by link key), or a link of one of its HCAs that is gone (a pulled cable: its ``link.down``
names it by key, the row is deleted).

Time steps: with ``resolution="auto"`` (the API's default) the series have at most
:data:`MAX_STEPS` time steps whatever the job's age, so the view costs about the same for a job of
ten minutes and one of two days: the stored resolution read is the finest of raw (every sweep),
per-minute and per-hour rollups (``telemetry.services.history``: rates averaged, errors summed,
written by telemetry's rollup task) kept back to the window's start with at most that many steps
stored in the window (``history.fit_resolution``): a job up to ~1 h at a 5-s sweep reads raw, up
to 12 h per-minute, up to 30 days per-hour. Beyond that, or where the rollups are missing, the
finest stored one is put in at most :data:`MAX_STEPS` bins (``history.downsample``: the mean of
the rates, the highest utilisation and congestion, the sum of the errors; a bin's ``t`` is its
start). The links'
summaries are of those steps (a per-hour series' highest rate is the highest hourly mean). An
explicit ``resolution`` (``raw``, ``minute``, ``hour``) reads that one whole, every stored step.
``resolution`` in the answer says what was read. A rollup covers complete minutes and hours only:
the last, incomplete one of a running job is not in a per-minute or per-hour series yet.

Pure reads; nothing is written.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from events.models import Alarm
from fabric.choices import NodeType
from fabric.keys import link_key, port_name, split_link_key
from fabric.models import Fabric, Link, Node, Port
from fabric.services.derive import host_for
from telemetry.services.history import RESOLUTIONS as STORED_RESOLUTIONS
from telemetry.services.history import ports_series

from ..models import Job
from . import state
from .faults import job_scopes
from .timeline import allocation_hosts

#: alarms listed at most (newest first)
MAX_ALARMS = 100
#: time steps of a series at most with ``resolution="auto"`` (a chart's width in points: the job
#: page's charts are ~700 px wide); module docstring, "Time steps"
MAX_STEPS = 720
#: what ``resolution`` takes: ``auto`` (bounded, module docstring) or a stored resolution read whole
RESOLUTIONS = ("auto", *STORED_RESOLUTIONS)
#: kinds of link, in the order the view lists them
KINDS = ("hca", "uplink")
#: seconds of a step of each stored resolution (raw: as swept, None)
RESOLUTION_STEP = {name: int(res) or None for name, res in STORED_RESOLUTIONS.items()}


def _mean(values: list) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def _max(values: list) -> float | None:
    xs = [v for v in values if v is not None]
    return max(xs) if xs else None


def _has_rates(series: dict[str, Any] | None) -> bool:
    return series is not None and any(v is not None for v in series["xmit_bytes_per_s"])


def _link_series(
    near: Port, far: Port | None, read: dict[int, dict[str, Any]], *, traffic_from_far: bool
) -> tuple[dict[str, Any], str]:
    """One link's series in the near end's directions (module docstring) and the end its traffic
    was read from (``"near"`` | ``"far"``): ``traffic_from_far`` prefers the far end (an HCA link:
    its leaf port), falling back to the other end when the preferred one has no rate in the
    window. Congestion of both ends (the worse one per time step) and the errors of both ends are
    taken on the read end's time steps. ``read``: the window's series of both ends by port id
    (``ports_series``)."""
    near_s = read[near.pk]
    far_s = read[far.pk] if far is not None else None
    # the preferred end when it has a rate, else the other one when it has; with no rate at either
    # end, the preferred end's time steps when it has any (stale samples), else the near end's
    if _has_rates(far_s) != _has_rates(near_s):
        use_far = _has_rates(far_s)
    else:
        use_far = traffic_from_far and far_s is not None and bool(far_s["t"] or not near_s["t"])
    base = far_s if use_far else near_s
    ts = base["t"]

    def at(series: dict[str, Any] | None, name: str) -> list:
        if series is None:
            return [None] * len(ts)
        if series is base or series["t"] == ts:  # the same sweeps (the common case): no alignment
            return list(series[name])
        by_t = dict(zip(series["t"], series[name], strict=True))
        return [by_t.get(t) for t in ts]

    cong_near, cong_far = at(near_s, "congestion"), at(far_s, "congestion")
    congestion = [
        c if other is None else other if c is None else max(c, other)
        for c, other in zip(cong_near, cong_far, strict=True)
    ]
    errors = [(a or 0) + (b or 0) for a, b in zip(at(near_s, "errors"), at(far_s, "errors"), strict=True)]
    xmit, rcv = (
        ("rcv_bytes_per_s", "xmit_bytes_per_s") if use_far else ("xmit_bytes_per_s", "rcv_bytes_per_s")
    )
    series = {
        "t": ts,
        "xmit_bytes_per_s": list(base[xmit]),
        "rcv_bytes_per_s": list(base[rcv]),
        "utilisation": list(base["utilisation"]),
        "congestion": congestion,
        "congestion_near": cong_near,
        "congestion_far": cong_far,
        "errors": errors,
        "resolution": base["resolution"],
        "step_s": base["step_s"],
    }
    return series, "far" if use_far else "near"


def _summary(series: dict[str, Any]) -> dict[str, Any]:
    return {
        "samples": len(series["t"]),
        "xmit_bytes_per_s_mean": _mean(series["xmit_bytes_per_s"]),
        "rcv_bytes_per_s_mean": _mean(series["rcv_bytes_per_s"]),
        "xmit_bytes_per_s_max": _max(series["xmit_bytes_per_s"]),
        "rcv_bytes_per_s_max": _max(series["rcv_bytes_per_s"]),
        "utilisation_mean": _mean(series["utilisation"]),
        "utilisation_max": _max(series["utilisation"]),
        "congestion_mean": _mean(series["congestion"]),
        "congestion_max": _max(series["congestion"]),
        "errors": sum(series["errors"]),
    }


def _sum_present(values: tuple) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) if xs else None


def _aggregate_aligned(links: list[dict[str, Any]]) -> dict[str, Any] | None:
    """:func:`_aggregate`'s series when every link with a time step has the same ones (one sweep
    grid: the common case), column by column; None when they differ. A link without a step adds
    nothing either way."""
    stepped = [link["series"] for link in links if link["series"]["t"]]
    if not stepped:
        return None
    ts = stepped[0]["t"]
    if any(s["t"] != ts for s in stepped[1:]):
        return None

    def column(name: str):
        return zip(*(s[name] for s in stepped), strict=True)

    return {
        "t": list(ts),
        "xmit_bytes_per_s": [_sum_present(c) for c in column("xmit_bytes_per_s")],
        "rcv_bytes_per_s": [_sum_present(c) for c in column("rcv_bytes_per_s")],
        "utilisation": [_max(c) for c in column("utilisation")],
        "congestion": [_max(c) for c in column("congestion")],
        "errors": [sum(c) for c in column("errors")],
    }


def _aggregate(links: list[dict[str, Any]]) -> dict[str, Any]:
    """Links of one kind summed per time step: bytes/s summed, utilisation and congestion the
    highest link's, errors summed; plus the same summary as one link's."""
    fast = _aggregate_aligned(links)
    if fast is not None:
        summary = _summary(fast)
        summary["links"] = len(links)
        return {"series": fast, "summary": summary}
    xs: dict[int, float] = {}
    rs: dict[int, float] = {}
    us: dict[int, float] = {}
    cs: dict[int, float] = {}
    es: dict[int, int] = {}  # every time step of every link (errors are never None)
    for link in links:
        s = link["series"]
        for t, x, r, u, c, e in zip(
            s["t"], s["xmit_bytes_per_s"], s["rcv_bytes_per_s"], s["utilisation"], s["congestion"], s["errors"],
            strict=True,
        ):  # fmt: skip
            if x is not None:
                xs[t] = xs[t] + x if t in xs else x
            if r is not None:
                rs[t] = rs[t] + r if t in rs else r
            if u is not None and (t not in us or u > us[t]):
                us[t] = u
            if c is not None and (t not in cs or c > cs[t]):
                cs[t] = c
            es[t] = es.get(t, 0) + e
    ts = sorted(es)
    out = {
        "t": ts,
        "xmit_bytes_per_s": [xs.get(t) for t in ts],
        "rcv_bytes_per_s": [rs.get(t) for t in ts],
        "utilisation": [us.get(t) for t in ts],
        "congestion": [cs.get(t) for t in ts],
        "errors": [es[t] for t in ts],
    }
    summary = _summary(out)
    summary["links"] = len(links)
    return {"series": out, "summary": summary}


def _order(entry: dict[str, Any]) -> tuple:
    """Sort key of the view's links: HCA links by host and near end, then uplinks worst first
    (congestion max, utilisation max, errors; a link without samples last), then by near end."""
    if entry["kind"] == "hca":
        return (0, entry["host"] or "", entry["near"]["name"])
    s = entry["summary"]
    return (
        1,
        -(s["congestion_max"] if s["congestion_max"] is not None else -1),
        -(s["utilisation_max"] if s["utilisation_max"] is not None else -1),
        -s["errors"],
        entry["near"]["name"],
    )


def _port_dict(port: Port | None) -> dict[str, Any] | None:
    if port is None:
        return None
    return {
        "id": port.pk,
        "name": port_name(str(port.node), port.port_num),
        "node_guid": port.node.node_guid,
        "port_num": port.port_num,
    }


def _job_hcas(job: Job) -> dict[str, tuple[str, int, Any]]:
    """The HCAs of a running job's hosts now, gone ones included: ``{node GUID: (host, rail,
    faults.Hca)}`` (``faults.job_scopes``: the one numbering of rails, ``faults.rails``)."""
    out = {}
    for scope in job_scopes([job]):
        for host, hcas in scope.hosts.items():
            for h in hcas:
                out[h.guid] = (host, h.rail, h)
    return out


def _hcas_down(hcas: dict[str, tuple[str, int, Any]], linked: set[str]) -> list[dict[str, Any]]:
    """The job's HCAs without a link now (a cable pulled: its link row is gone with it, or the
    HCA vanished from the fabric): ``[{"host", "hca", "guid", "rail", "gone", "alarm": {"id",
    "code", "severity", "message", "url"} | None}]`` by host and rail; the alarm is the open
    ``link.down`` naming the HCA's GUID, else its open ``node.removed``."""
    missing = {g: v for g, v in hcas.items() if g not in linked}
    if not missing:
        return []
    alarm_of: dict[str, Alarm] = {}
    for a in (
        Alarm.objects.open().filter(code__in=["link.down", "node.removed"]).order_by("-first_seen", "-id")
    ):
        if a.code == "node.removed":
            guids = [a.object_key]
        else:
            try:
                guids = [g for g, _ in split_link_key(a.object_key)]
            except ValueError:
                continue
        for g in guids:
            if g in missing and (g not in alarm_of or alarm_of[g].code != "link.down"):
                alarm_of[g] = a
    out = []
    for guid, (host, rail, h) in missing.items():
        a = alarm_of.get(guid)
        out.append({
            "host": host, "hca": h.name, "guid": guid, "rail": rail, "gone": h.gone,
            "alarm": {"id": a.pk, "code": a.code, "severity": a.severity, "message": a.message,
                      "object": a.object_repr, "url": a.get_absolute_url()} if a else None,
        })  # fmt: skip
    return sorted(out, key=lambda d: (d["host"], d["rail"], d["guid"]))


def job_hosts(job: Job) -> list[dict[str, Any]]:
    """The hosts a job was given, by name: ``[{"name", "host_id", "gpus": [GPU indexes],
    "units": ["GPU3", "GPU7 MIG 1g.10gb gi1", …]}]`` from its allocation's items (all of them: an
    ended job shows what it held; ``timeline.allocation_hosts``); a job without an allocation:
    ``Job.placement``'s hosts with empty GPU lists."""
    hosts = {h["name"]: h for h in allocation_hosts([job.allocation_id]).get(job.allocation_id, [])}
    for name in job.placement or {}:
        hosts.setdefault(name, {"name": name, "host_id": None, "gpus": [], "units": []})
    return [hosts[n] for n in sorted(hosts)]


def _where(job: Job, now: datetime | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The hosts part of the view (:func:`job_fabric_hosts`) and what the rest needs (None when
    the job holds no hosts)."""
    now = now or timezone.now()
    start = job.started_at or job.placed_at
    end = job.ended_at or now
    out: dict[str, Any] = {
        "job": job.pk,
        "state": job.state,
        "window": {"start": None, "end": None, "start_epoch": None, "end_epoch": None, "ongoing": False},
        "fabric": None,
        "hosts": [],
        "highlight": [],
        "units": [],
        "notes": [],
    }
    # a pending job holds nothing (a requeued one keeps its ended allocation: not its hosts now)
    hosts = job_hosts(job) if start is not None else []
    out["hosts"] = hosts
    if start is None or not hosts:  # pending (never placed, or requeued after a preemption)
        out["notes"].append("the job is not placed: no hosts and no fabric window")
        return out, None
    if end < start:  # clock skew between writers: an empty window, not an error
        end = start
    out["window"] = {
        "start": start.isoformat(),
        "end": end.isoformat(),
        "start_epoch": start.timestamp(),
        "end_epoch": end.timestamp(),
        "ongoing": job.ended_at is None,
    }

    loc = state.current_locality()
    names = [h["name"] for h in hosts]
    host_ids = [h["host_id"] for h in hosts if h["host_id"]]
    # the HCAs of the host rows the job's GPUs are on (a server also on a storage fabric has a
    # host row there too: not the job's); by name only for a placement without GPU rows
    which = Q(host_id__in=host_ids) if host_ids else Q(host__name__in=names)
    cas = list(
        Node.objects.filter(which, node_type=NodeType.CA)
        .select_related("host", "fabric")
        .order_by("node_guid")
    )
    if not cas:
        out["notes"].append("no HCA of the job's hosts is on a stored fabric")
    fabric_counts: dict[int, int] = defaultdict(int)
    for ca in cas:
        fabric_counts[ca.fabric_id] += 1
    fabric: Fabric | None = None
    if fabric_counts:
        site_fabrics = {loc.hosts[n].fabric_id for n in names if n in loc.hosts}
        fid = (
            next(iter(site_fabrics)) if len(site_fabrics) == 1 else max(fabric_counts, key=fabric_counts.get)
        )
        fabric = next((ca.fabric for ca in cas if ca.fabric_id == fid), None) or Fabric.objects.get(pk=fid)
        out["fabric"] = {"id": fabric.pk, "name": fabric.name}
        if len(fabric_counts) > 1:
            out["notes"].append("the job's hosts have HCAs on several fabrics: the map shows " + fabric.name)
    ca_by_host: dict[str, list[Node]] = defaultdict(list)
    for ca in cas:
        ca_by_host[ca.host.name].append(ca)
    for h in hosts:
        site = loc.hosts.get(h["name"])
        h["unit"] = site.unit if site else None
        h["unit_name"] = loc.domains[site.unit].name if site else None
        h["cas"] = [ca.node_guid for ca in ca_by_host.get(h["name"], [])]
        if fabric is not None:
            out["highlight"] += [
                ca.node_guid for ca in ca_by_host.get(h["name"], []) if ca.fabric_id == fabric.pk
            ]
    out["highlight"].sort()

    # units of the job's hosts and their uplinks
    unit_hosts: dict[str, list[str]] = defaultdict(list)
    for h in hosts:
        if h["unit"]:
            unit_hosts[h["unit"]].append(h["name"])
    uplink_unit: dict[int, str] = {}
    switch_guids: set[str] = set()
    for key in sorted(unit_hosts):
        dom = loc.domains[key]
        out["units"].append(
            {"key": key, "name": dom.name, "switches": list(dom.switches), "hosts": unit_hosts[key]}
        )
        switch_guids.update(dom.switches)
        for link_id in dom.uplinks:
            uplink_unit.setdefault(link_id, key)

    return out, {"start": start, "end": end, "names": names, "cas": cas, "fabric_counts": fabric_counts,
                 "uplink_unit": uplink_unit, "switch_guids": switch_guids}  # fmt: skip


def job_fabric_hosts(job: Job, *, now: datetime | None = None) -> dict[str, Any]:
    """Where the job is, without its traffic: the ``job``, ``state``, ``window``, ``fabric``,
    ``hosts``, ``highlight``, ``units`` and ``notes`` of :func:`job_fabric_view` (the same
    shapes). Reads no counter history and no alarm, so its cost does not grow with the job's age:
    what the job page renders at once (its map and GPUs), the rest is fetched on demand from
    ``/api/scheduler/jobs/{id}/fabric/``."""
    return _where(job, now)[0]


def job_fabric_view(
    job: Job,
    *,
    now: datetime | None = None,
    series: str = "links",
    resolution: str = "auto",
    max_steps: int = MAX_STEPS,
) -> dict[str, Any]:
    """The fabric as one job saw it (module docstring). ``now`` ends the window of a job still
    holding its GPUs (default: the current time). ``series``: ``"links"`` (every link's series,
    as below) or ``"totals"`` (the links without their ``series``: their summaries and the
    totals' series are kept; what the job page draws). ``resolution``: ``"auto"`` (at most
    ``max_steps`` time steps: module docstring, "Time steps") or ``"raw"``, ``"minute"``,
    ``"hour"`` (that stored resolution, every step). Links are listed by kind (HCA links, then
    uplinks); HCA links by host and near end, uplinks worst first (congestion max, utilisation
    max, errors; then by near end). Raises ValueError for another ``series`` or ``resolution``,
    or ``max_steps`` < 1.

    Returns (JSON-ready; times ISO 8601 and epoch seconds, UTC)::

        {"job": id, "state": str,
         "window": {"start": iso | None, "end": iso | None, "start_epoch": s, "end_epoch": s,
                    "ongoing": bool},            # None/None: never placed (nothing to show)
         "fabric": {"id", "name"} | None,        # the fabric of the job's hosts (the map's)
         "resolution": {"asked": "auto" | "raw" | "minute" | "hour",
                        "read": "raw" | "minute" | "hour" | None,   # None: no link to read
                        "step_s": s | None,    # a step: 60, 3600, a bin's width; None: raw sweeps
                        "downsampled": bool,   # put in bins (history.downsample)
                        "max_steps": n | None},  # the bound (auto), None: every stored step
         "hosts": [{"name", "host_id", "gpus": [index], "units": [str], "unit": key | None,
                    "unit_name": str | None, "cas": [CA node GUID]}],
         "highlight": [CA node GUID],            # what the map marks
         "units": [{"key", "name", "switches": [GUID], "hosts": [name of the job's hosts]}],
         "leaves": [{"id", "node_guid", "name"}],   # the switches the job's HCAs are cabled to
         "links": [{"kind": "hca" | "uplink", "host": name | None, "unit": key | None,
                    "link_id", "near": port, "far": port | None, "rate_gbps",
                    "traffic_end": "near" | "far",   # whose counters gave the traffic
                    "job_leaf": bool,    # an uplink of a leaf one of the job's HCAs is cabled to
                    # "series": left out with series="totals"
                    "series": {"t": [epoch s], "xmit_bytes_per_s": [bytes/s out of the near end],
                               "rcv_bytes_per_s": [bytes/s into it], "utilisation": [0..1] (of
                               the traffic end), "congestion": [0..1] (worse end),
                               "congestion_near": [0..1] (near end's PortXmitWait),
                               "congestion_far": [0..1] (towards the near end), "errors":
                               [error-counter deltas, both ends], "resolution": "raw" | "minute"
                               | "hour", "step_s": s | None},
                    "summary": {"samples", "xmit_bytes_per_s_mean", "rcv_bytes_per_s_mean",
                                "xmit_bytes_per_s_max", "rcv_bytes_per_s_max", "utilisation_mean",
                                "utilisation_max", "congestion_mean", "congestion_max", "errors"}}],
         "totals": {"hca": {"series": {t, xmit_bytes_per_s (sum), rcv_bytes_per_s (sum),
                                       utilisation (max), congestion (max), errors (sum)},
                            "summary": {... as a link's, "links": n}},
                    "uplink": {...}},
         "hcas_down": [{"host", "hca", "guid", "rail", "gone", "alarm": {...} | None}],  # HCAs of a
                                                 # running job without a link now (pulled, vanished)
         "alarms": [{"id", "code", "severity", "state", "object", "message", "first_seen",
                     "last_seen", "cleared_at", "url"}],   # newest first, at most MAX_ALARMS
         "notes": [str]}

    A port is ``{"id", "name", "node_guid", "port_num"}``. Raises nothing for a job that is not
    placed (pending, cancelled before placement): the lists are empty and ``notes`` says why.
    """
    if series not in ("links", "totals"):
        raise ValueError(f"series {series!r}: use links or totals")
    if resolution not in RESOLUTIONS:
        raise ValueError(f"resolution {resolution!r}: use {', '.join(RESOLUTIONS)}")
    if max_steps < 1:
        raise ValueError(f"max_steps {max_steps}: at least 1")
    bound = max_steps if resolution == "auto" else None
    out, ctx = _where(job, now)
    out.update(leaves=[], links=[], totals={k: _aggregate([]) for k in KINDS}, alarms=[], hcas_down=[])
    out["resolution"] = {
        "asked": resolution, "read": None, "step_s": None, "downsampled": False, "max_steps": bound,
    }  # fmt: skip
    if ctx is None:
        return out
    start, end, names, cas = ctx["start"], ctx["end"], ctx["names"], ctx["cas"]
    fabric_counts, uplink_unit, switch_guids = ctx["fabric_counts"], ctx["uplink_unit"], ctx["switch_guids"]
    # HCA links: every cabled port of the job's CAs
    ca_ids = [ca.pk for ca in cas]
    host_of_ca = {ca.pk: ca.host.name for ca in cas}
    hca_links = (
        Link.objects.filter(Q(port_a__node_id__in=ca_ids) | Q(port_b__node_id__in=ca_ids))
        .select_related("port_a__node", "port_b__node")
        .order_by("pk")
    )
    uplinks = (
        Link.objects.filter(pk__in=list(uplink_unit))
        .select_related("port_a__node", "port_b__node")
        .order_by("pk")
    )
    switch_ids = set(
        Node.objects.filter(node_guid__in=switch_guids, fabric_id__in=list(fabric_counts) or [0]).values_list(
            "pk", flat=True
        )
    )
    entries: list[tuple[str, Link, Port, Port, str | None, str | None]] = []
    job_leaf_ids: set[int] = set()  # the switches the job's HCAs are cabled to
    for link in hca_links:
        near, far = (
            (link.port_a, link.port_b) if link.port_a.node_id in host_of_ca else (link.port_b, link.port_a)
        )
        entries.append(("hca", link, near, far, host_of_ca[near.node_id], None))
        if far.node_id not in job_leaf_ids:
            job_leaf_ids.add(far.node_id)
            out["leaves"].append({"id": far.node_id, "node_guid": far.node.node_guid, "name": str(far.node)})
    out["leaves"].sort(key=lambda n: (n["name"], n["node_guid"]))
    for link in uplinks:
        near, far = (
            (link.port_a, link.port_b) if link.port_a.node_id in switch_ids else (link.port_b, link.port_a)
        )
        entries.append(("uplink", link, near, far, None, uplink_unit[link.pk]))
    port_ids = {p.pk for _k, _l, near, far, _h, _u in entries for p in (near, far)}
    # every end's history, each chunk read once; at most ``bound`` steps (module docstring)
    read = ports_series(port_ids, start, end, resolution, max_steps=bound)
    if read:
        any_series = next(iter(read.values()))
        step_s = any_series["step_s"]
        out["resolution"].update(
            read=any_series["resolution"],
            step_s=step_s,
            downsampled=step_s is not None and step_s != RESOLUTION_STEP[any_series["resolution"]],
        )
    link_keys: list[str] = []
    for kind, link, near, far, host, unit in entries:
        link_keys.append(link_key((near.node.node_guid, near.port_num), (far.node.node_guid, far.port_num)))
        link_series, traffic_end = _link_series(near, far, read, traffic_from_far=kind == "hca")
        out["links"].append({
            "kind": kind, "host": host, "unit": unit, "link_id": link.pk,
            "near": _port_dict(near), "far": _port_dict(far), "rate_gbps": near.rate_gbps or link.rate_gbps,
            "traffic_end": traffic_end, "series": link_series, "summary": _summary(link_series),
            "job_leaf": kind == "uplink" and near.node_id in job_leaf_ids,
        })  # fmt: skip
    hcas = _job_hcas(job) if job.ended_at is None and job.allocation_id else {}
    for e in out["links"]:
        if e["kind"] == "hca":
            e["rail"] = hcas.get(e["near"]["node_guid"], (None, None))[1]
    linked = {e["near"]["node_guid"] for e in out["links"] if e["kind"] == "hca"}
    out["hcas_down"] = _hcas_down(hcas, linked)
    out["links"].sort(key=_order)
    out["totals"] = {k: _aggregate([e for e in out["links"] if e["kind"] == k]) for k in KINDS}
    if series == "totals":
        for e in out["links"]:
            del e["series"]
    if not any(e["summary"]["samples"] for e in out["links"]):
        out["notes"].append(
            "no counter history of these links in the window (no sweep stored, or rolled off)"
        )

    # alarms of the window on those nodes and ports, and on the links of its HCAs that are gone
    # (a pulled cable's link row is deleted: its link.down alarm names it by key) and on its
    # HCAs gone from the fabric (node.removed names them by GUID and name)
    node_ids = set(ca_ids) | switch_ids
    window = Q(first_seen__lte=end) & (Q(cleared_at__isnull=True) | Q(cleared_at__gte=start))
    ca_guids = {ca.node_guid for ca in cas}
    fabric_ids = list(fabric_counts) or [job.pool.fabric_id or 0]
    for key, otype, text in (
        Alarm.objects.filter(window, object_type__in=["link", "node"], fabric_id__in=fabric_ids)
        .exclude(object_key__in=link_keys)
        .values_list("object_key", "object_type", "object_repr")
    ):  # fmt: skip
        if otype == "link":
            try:
                ends = split_link_key(key)
            except ValueError:
                continue
            if any(g in ca_guids for g, _ in ends):
                link_keys.append(key)
        elif host_for(NodeType.CA, text, text) in names:
            ca_guids.add(key)
    alarms = (
        Alarm.objects.filter(
            Q(node_id__in=node_ids)
            | Q(port_id__in=port_ids)
            | Q(object_type="link", object_key__in=link_keys)
            | Q(object_type="node", object_key__in=sorted(ca_guids))
        )
        .filter(window)
        .order_by("-first_seen", "-id")[:MAX_ALARMS]
    )
    out["alarms"] = [
        {
            "id": a.pk, "code": a.code, "severity": a.severity, "state": a.state, "object": a.object_repr,
            "message": a.message, "first_seen": a.first_seen.isoformat(), "last_seen": a.last_seen.isoformat(),
            "cleared_at": a.cleared_at.isoformat() if a.cleared_at else None, "url": a.get_absolute_url(),
        }
        for a in alarms
    ]  # fmt: skip
    return out
