"""Benchmark: how Weft's costs grow with the fabric, per port, from ~1k to ~100k ports (issue 23 §7).

Generated fabrics (``lab.netgen``, HDR): a rail-optimised pod of ~1k ports (the demo's
``DEMO_SPEC``) and 3-level fat trees of ~5k, ~25k and ~100k ports (pods of 20 leaves × 20 hosts
and 20 spines, the cores growing with the pods: the same shape at every size, so the per-port
figures compare). ``--sizes`` picks some (``1k,5k,25k,100k``). For each size, on a scratch database
(:mod:`benchkit`; SQLite or a new database on ``DATABASE_URL``'s PostgreSQL server), one fabric at
a time (the previous one deleted):

* ``ingest``: ``fabric.services.ingest.import_topology_text`` of the generated ibnetdiscover text
  (the discovery ingest without the lab: the text is what ``ibnetdiscover`` prints); bytes = the
  database's growth (``pg_database_size``; SQLite: the file's);
* one sweep's counters stored directly (``bench/metrics.py``'s ``ingest``: seeded random values),
  then over Django's test client, ``--runs`` times each (medians, [min, max] spread):
  ``metrics`` (``/metrics?fabric=``), ``map_json`` (``/api/fabric/fabrics/<pk>/map/``, a viewer),
  ``ufm_ports`` (``/ufmRest/resources/ports``, HTTP Basic: one password hash per request
  included), ``ports_page`` (``/ports/?fabric=``, the first page); bytes = the body's;
* ``placement``: 8 GPUs per host written as bench rows, then ``scheduler.services.state
  .current_locality`` (rebuilt) and ``scheduler.placement.place`` of a 2,048-GPU job (half the
  GPUs when the fabric has fewer than 4,096) on an all-free state; seconds, no bytes;
* ``sweep``: the counter sweep needs a lab: ibsim + OpenSM started on the same text
  (``lab.Lab``), ``fabric.services.discovery.discover``, one warm-up ``poll_fabric`` and
  ``--runs`` more (medians), up to ``--lab-max-ports`` (default 150,000: ibsim 0.10 + OpenSM held
  the 96,000-port tree here, up in ~140 s and discovered in ~30 s on two shared cores; lower it
  for a quicker run); above it, or when the lab does
  not start, ``sweep`` says why in ``skipped``.

Per item: ``s`` (median seconds), ``spread_s``, ``bytes``, ``s_per_port`` (µs in
``us_per_port``), ``bytes_per_port``. ``growth``: per item the per-port cost at the largest size
divided by that at 25k (target ≤ 1.3×; ``flagged`` lists the items above). ``load``/``quiet`` as
every bench. Not a test: nothing is asserted.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/x python bench/scale.py [--sizes 1k,5k,25k,100k] [--runs 3] [--json]
    python bench/scale.py --tiny --json     # one ~250-port fabric, each item once, lab included
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

import benchkit

#: per-port growth (largest size ÷ 25k) above which an item is flagged
GROWTH_TARGET = 1.3
ITEMS = ("ingest", "sweep", "metrics", "map_json", "ufm_ports", "ports_page", "placement")


def topologies() -> dict[str, tuple[str, object]]:
    """Size label -> (description, generator of the netfile text)."""
    from lab import netgen

    def tree(pods: int):  # 20 leaves x 20 hosts per pod, 20 spines; cores grow with the pods
        group = 10 if pods <= 10 else 20
        return lambda: netgen.fat_tree_3level(pods, 20, 20, 20 * group, 20)

    return {
        "tiny": ("2-level fat tree, 4 leaves x 4 hosts, 2 spines", lambda: netgen.fat_tree_2level(4, 2, 4)),
        "1k": (f"rail pod {netgen.DEMO_SPEC}", lambda: netgen.parse_spec(netgen.DEMO_SPEC)),
        "5k": ("3-level fat tree, 2 pods (800 hosts)", tree(2)),
        "25k": ("3-level fat tree, 10 pods (4,000 hosts)", tree(10)),
        "100k": ("3-level fat tree, 40 pods (16,000 hosts)", tree(40)),
    }


def _db_bytes() -> int:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_database_size(current_database())")
            return int(cur.fetchone()[0])
    path = Path(connection.settings_dict["NAME"])
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*") if p.is_file())


def _timed(fn, runs: int) -> tuple[list[float], object]:
    times, last = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - t0)
    return times, last


def _item(times: list[float], nbytes: int | None, ports: int) -> dict:
    med, spread = benchkit.median_spread(times)
    return {
        "s": med,
        "spread_s": spread,
        "bytes": nbytes,
        "us_per_port": round(med * 1e6 / ports, 3),
        "bytes_per_port": round(nbytes / ports, 1) if nbytes is not None else None,
    }


def _get(client, url: str, **headers) -> int:
    resp = client.get(url, secure=True, **headers)
    body = b"".join(resp.streaming_content) if resp.streaming else resp.content
    if resp.status_code != 200:
        raise RuntimeError(f"GET {url}: {resp.status_code} {body[:300]!r}")
    return len(body)


def lab_sweep(name: str, text: str, runs: int, kit: benchkit.Bench) -> dict:
    """Start a lab on ``text``, discover it, sweep it (warm-up + ``runs``); seconds and ports."""
    from fabric.models import Fabric, Port
    from fabric.services.discovery import discover
    from lab import Lab
    from telemetry.models import Sweep
    from telemetry.services import publisher
    from telemetry.services.sweep import poll_fabric

    t0 = time.perf_counter()
    lab = kit.stops(Lab(text))
    try:
        lab.start(timeout=900)
        lab_s = time.perf_counter() - t0
        fabric = Fabric.objects.create(name=name, tool_env=lab.tool_env, discovery_timeout_s=900)
        t = time.perf_counter()
        discover(fabric, timeout=900)
        discovery_s = time.perf_counter() - t
        ports = Port.objects.filter(node__fabric=fabric, port_num__gte=1).count()
        poll_fabric(fabric)
        publisher.flush(60)
        times = []
        for _ in range(runs):
            times.append(poll_fabric(fabric).duration_s)
            publisher.flush(60)
        Sweep.objects.filter(fabric=fabric).delete()
        fabric.delete()
        return {
            "times": times,
            "ports": ports,
            "lab_start_s": round(lab_s, 2),
            "discovery_s": round(discovery_s, 2),
        }
    finally:
        lab.stop()


def bench_size(label: str, desc: str, text: str, args, kit: benchkit.Bench, say) -> dict:
    """Every item on one fabric (module docstring); the fabric is deleted at the end."""
    import metrics as metrics_bench  # bench/metrics.py: one sweep's counters stored directly
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from accounts.roles import set_role
    from fabric.models import Fabric, Host, Port
    from fabric.services.ingest import import_topology_text
    from pools.models import Gpu
    from scheduler.placement import FreeState, Request, place
    from scheduler.services.state import current_locality, forget_locality
    from telemetry import metrics as metrics_view

    name = f"scale-{label}"
    out: dict = {"topology": desc}
    before = _db_bytes()
    t0 = time.perf_counter()
    fabric = import_topology_text(name, text, filename=f"{name}.ibnetdiscover").fabric
    ingest_s = time.perf_counter() - t0
    ports = Port.objects.filter(node__fabric=fabric).count()
    out["ports"] = ports
    out["ingest"] = _item([ingest_s], _db_bytes() - before, ports)
    say(f"{label}: {ports} ports, ingest {ingest_s:.2f} s")
    metrics_bench.ingest(name, text, 0.02, 23)  # keeps the imported topology, adds the counters

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    settings.WEFT_UFM_FABRIC = name
    user = get_user_model().objects.filter(username="bench-scale").first()
    if user is None:
        user = get_user_model().objects.create_user("bench-scale", password="bench-scale-pw")
        set_role(user, "viewer")
    viewer = Client(REMOTE_ADDR="127.0.0.1")
    viewer.force_login(user)
    basic = "Basic " + base64.b64encode(b"bench-scale:bench-scale-pw").decode()
    anon = Client(REMOTE_ADDR="127.0.0.1")
    metrics_view._TOPOLOGY.clear()
    urls = {
        "metrics": (anon, f"/metrics?fabric={name}", {}),
        "map_json": (viewer, f"/api/fabric/fabrics/{fabric.pk}/map/", {}),
        "ufm_ports": (
            Client(REMOTE_ADDR="127.0.0.1"),
            "/ufmRest/resources/ports",
            {"HTTP_AUTHORIZATION": basic},
        ),
        "ports_page": (viewer, f"/ports/?fabric={fabric.pk}", {}),
    }
    for item, (client, url, headers) in urls.items():
        _get(client, url, **headers)  # warm: caches filled as after the first request
        times, nbytes = _timed(lambda c=client, u=url, h=headers: _get(c, u, **h), args.runs)
        out[item] = _item(times, nbytes, ports)
        say(f"{label}: {item} {out[item]['s']} s, {nbytes} bytes")

    hosts = list(Host.objects.filter(fabric=fabric).values_list("pk", "name"))
    Gpu.objects.bulk_create(
        [Gpu(host_id=pk, uuid=f"GPU-scale-{label}-{pk}-{i}", index=i, product_name="NVIDIA H100 80GB HBM3",
             memory_total_mib=81559, memory_reserved_mib=0, health="healthy",
             mig_mode_current="disabled", mig_mode_pending="disabled")
         for pk, _ in hosts for i in range(8)],
        batch_size=5000,
    )  # fmt: skip
    count = min(2048, 8 * len(hosts) // 2)
    free = FreeState(gpus={h: 8 for _, h in hosts})

    def placement():
        forget_locality()
        decision = place(current_locality(), free, Request(count=count))
        if sum(decision.placed.values()) != count:
            raise RuntimeError(f"placement of {count} GPUs failed: {decision.code} {decision.reasons}")

    times, _ = _timed(placement, args.runs)
    out["placement"] = _item(times, None, ports) | {"gpus": count}
    say(f"{label}: placement of {count} GPUs {out['placement']['s']} s")
    forget_locality()
    Fabric.objects.filter(pk=fabric.pk).delete()

    if ports > args.lab_max_ports:
        out["sweep"] = {
            "skipped": f"{ports} ports > --lab-max-ports {args.lab_max_ports}: ibsim + OpenSM bring-up "
            "and a lab sweep of it were not asked for"
        }
    else:
        try:
            lab = lab_sweep(f"{name}-lab", text, args.runs, kit)
            out["sweep"] = _item(lab["times"], None, lab["ports"]) | {
                k: lab[k] for k in ("ports", "lab_start_s", "discovery_s")
            }
            say(f"{label}: sweep {out['sweep']['s']} s ({lab['ports']} ports in the lab)")
        except Exception as exc:  # a lab that does not start is a figure too: say why
            out["sweep"] = {"skipped": f"lab sweep failed: {type(exc).__name__}: {str(exc)[-300:]}"}
    return out


def growth(results: dict[str, dict]) -> dict:
    """Per item: us_per_port and bytes_per_port at the largest size ÷ at 25k (None without both)."""
    if "25k" not in results:
        return {"note": "needs the 25k size and a larger one"}
    base = results["25k"]
    largest = max(results, key=lambda k: results[k].get("ports", 0))
    if largest == "25k":
        return {"note": "25k is the largest size measured"}
    top = results[largest]
    out: dict = {"largest": largest, "against": "25k", "target": GROWTH_TARGET, "items": {}, "flagged": []}
    for item in ITEMS:
        a, b = base.get(item, {}), top.get(item, {})
        row = {}
        for key in ("us_per_port", "bytes_per_port"):
            if a.get(key) and b.get(key) is not None:
                row[key.replace("_per_port", "_ratio")] = round(b[key] / a[key], 3)
        out["items"][item] = row or {"note": "not measured at both sizes"}
        if any(v > GROWTH_TARGET for v in row.values()):
            out["flagged"].append(item)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1k,5k,25k,100k", help="comma-separated: 1k,5k,25k,100k")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lab-max-ports", type=int, default=150000, help="largest fabric swept in a lab")
    ap.add_argument("--tiny", action="store_true", help="one ~250-port fabric, each item once (seconds)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    if args.tiny:
        args.sizes, args.runs = "tiny", 1
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    kit = benchkit.Bench("scale")
    with kit.scratch_database(benchkit.pg_server_from_env()):
        benchkit.django_setup()
        from django.db import connection
        from django.test.utils import setup_test_environment

        setup_test_environment()
        known = topologies()
        bad = [s for s in sizes if s not in known]
        if bad:
            raise SystemExit(f"unknown size(s) {bad}: use {', '.join(known)}")
        results = {}
        for label in sizes:
            desc, gen = known[label]
            try:
                results[label] = bench_size(label, desc, gen(), args, kit, say)
            except (MemoryError, RuntimeError) as exc:  # the largest the machine holds: say where it stopped
                results[label] = {"topology": desc, "error": f"{type(exc).__name__}: {str(exc)[-300:]}"}
                say(f"{label}: stopped: {exc}")
                break
        out = {
            "database": connection.vendor,
            "runs": args.runs,
            "sizes": results,
            "growth": growth(results),
            "tiny": args.tiny,
        }
    print(json.dumps(kit.finish(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
