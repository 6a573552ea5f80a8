"""Routing benchmark (issue 24 §1): LFT collection vs ``dump_lfts``, and all-pairs job paths.

1. **Collection.** On a lab fabric (default: the Selene compute fabric from ``$WEFT_REALDATA``,
   666 switches, 4,341 CAs), discovered into Weft: ``--runs`` alternating pairs of a bare
   ``dump_lfts`` (the baseline, as an operator runs it) and Weft's read of every switch's LFT
   (``routing.services.collect.read_tables``: the ``lftpoll`` child, pipelined LID-routed SMPs),
   after one warm-up each; medians, the ratio of the medians (target ≤ 0.25) and the spread of the
   per-pair ratios. The full ``collect_routes`` (read + digests + store, or compare) is timed too,
   and the tables read are checked equal to ``dump_lfts``'s.
2. **Paths.** Pure computation over the stored tables (``routing.services.current.current_routes``
   built once, its build time reported): ``routing.paths.group_loads`` for an all-to-all job, one
   group per rail (the job's hosts' HCA LIDs on that rail). On Selene: the job on every 8-rail host
   (458); and a 1,024-host job on a generated rail-optimised pod (``lab.netgen.rail_pod(1024, 2)``:
   the largest 2-level pod with 1,024 hosts has 2 rails at radix 64), target ≤ 1 s. Also
   ``pair_paths`` (every pair's port list) for the ring of each rail.

Measured 2026-12-07 (SQLite, 2 cores shared with other work: load average 8.5 at start, 10.5
at the end, so ``"quiet": false``; 3 alternating pairs, medians):

=========================================  ==========  =================================
Selene (666 switches, 4,341 CAs)            Weft        baseline
=========================================  ==========  =================================
read every LFT                              5.51 s      ``dump_lfts`` 54.2 s: ratio 0.10
                                                        (pairs 0.08-0.13), tables equal
collect_routes, tables unchanged            5.70 s
RouteTables built from the database         0.50 s
all-to-all job, 458 hosts x 8 rails         1.04 s      1,674,448 pairs
routing report (all 18.8 M CA pairs)        36.4 s      computed once per snapshot, stored
1,024-host job, rail pod (96 switches)
  all-to-all, 2 rails                       0.51 s      2,095,104 pairs (target 1 s)
  ring pair_paths                           0.03 s
  routing report (4.2 M CA pairs)           1.06 s
=========================================  ==========  =================================

(An earlier run at load 8.5: read 5.01 s vs ``dump_lfts`` 44.9 s, ratio 0.11, pairs 0.07-0.12;
the 1,024-host job 0.62 s.)

The machine's 1-minute load average is printed at start and end; figures are marked
``"quiet": false`` when it was above 0.5 at the start (other work skews the timings).

``python bench/routing.py [--tiny] [--runs K] [--topology PATH] [--rail-hosts N] [--json]``;
``--tiny``: a 3-leaf fat tree and a 16-host pod, seconds (CI). The last line is JSON. Not a test:
nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")


def _django():
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _spread(values: list[float]) -> list[float]:
    return [round(min(values), 4), round(max(values), 4)]


def _lab_fabric(name: str, netfile: str):
    from fabric.models import Fabric
    from fabric.services.discovery import discover
    from lab import Lab

    t = time.monotonic()
    lab = Lab(netfile).start(timeout=900)
    lab.wait_subnet_up(timeout=900)  # every LFT set (MASTER comes before the first sweep's routes)
    lab_s = time.monotonic() - t
    Fabric.objects.filter(name=name).delete()
    fabric = Fabric.objects.create(name=name, tool_env=lab.tool_env, discovery_timeout_s=900)
    t = time.monotonic()
    discover(fabric, timeout=900)
    return lab, fabric, {"lab_start_s": round(lab_s, 2), "discovery_s": round(time.monotonic() - t, 2)}


def bench_collect(name: str, netfile: str, runs: int) -> dict:
    """Part 1 on one netfile; returns its numbers (seconds)."""
    from routing.parsers import UNASSIGNED, parse_dump_lfts
    from routing.services.collect import collect_routes, read_tables

    lab, fabric, out = _lab_fabric(name, netfile)
    try:
        collect_routes(fabric, reason="bench")  # warm-up, and the first snapshot
        lab.run(["dump_lfts"], timeout=900)
        base, mine, pairs = [], [], []
        for _ in range(runs):
            t = time.monotonic()
            text = lab.run(["dump_lfts"], timeout=900).stdout
            b = time.monotonic() - t
            t = time.monotonic()
            source, tables, warnings = read_tables(fabric)
            m = time.monotonic() - t
            base.append(b)
            mine.append(m)
            pairs.append(m / b)
        oracle = {s.node_guid: s.lft.rstrip(bytes([UNASSIGNED])) for s in parse_dump_lfts(text)}
        equal = oracle == {g: lft.rstrip(bytes([UNASSIGNED])) for g, (_l, lft) in tables.items()}
        full = []
        for _ in range(max(1, runs // 2)):
            t = time.monotonic()
            collect_routes(fabric, reason="bench")
            full.append(time.monotonic() - t)
        out.update(
            {
                "switches": len(tables),
                "source": source,
                "warnings": warnings,
                "tables_equal_dump_lfts": equal,
                "dump_lfts_s": round(statistics.median(base), 4),
                "read_s": round(statistics.median(mine), 4),
                "ratio": round(statistics.median(mine) / statistics.median(base), 4),
                "ratio_spread": _spread(pairs),
                "dump_lfts_spread_s": _spread(base),
                "read_spread_s": _spread(mine),
                "collect_routes_unchanged_s": round(statistics.median(full), 4),
            }
        )
        out["paths"] = bench_paths(fabric, runs)
        return out
    finally:
        lab.stop()


def bench_paths(fabric, runs: int, max_hosts: int | None = None) -> dict:
    """Part 2 over the stored tables of ``fabric``: one group per rail of a job on every host
    with the most HCAs (at most ``max_hosts`` hosts)."""
    from fabric.choices import NodeType
    from fabric.models import Port
    from routing.paths import group_loads, pair_paths
    from routing.services.current import clear_cache, current_routes

    clear_cache()
    t = time.monotonic()
    cur = current_routes(fabric)
    build_s = time.monotonic() - t
    # hosts and their rails: "<host> mlx5_<i>" (the HCA's device name is the rail)
    by_host: dict[str, dict[str, int]] = {}
    for desc, lid in Port.objects.filter(
        node__fabric=fabric, node__node_type=NodeType.CA, lid__gt=0
    ).values_list("node__description", "lid"):
        m = re.match(r"^(\S+) (mlx5_\d+)\s*$", desc)
        if m:
            by_host.setdefault(m.group(1), {})[m.group(2)] = lid
    width = max((len(r) for r in by_host.values()), default=0)
    hosts = sorted(h for h, r in by_host.items() if len(r) == width)[:max_hosts]
    rails = sorted({r for h in hosts for r in by_host[h]})
    groups = [[by_host[h][r] for h in hosts] for r in rails]
    pairs = sum(len(g) * (len(g) - 1) for g in groups)
    times, ring_times = [], []
    loads = unrouted = None
    for _ in range(runs):
        t = time.monotonic()
        loads, unrouted = group_loads(cur.tables, groups)
        times.append(time.monotonic() - t)
        ring = [(g[i], g[(i + 1) % len(g)]) for g in groups for i in range(len(g))]
        t = time.monotonic()
        pair_paths(cur.tables, ring)
        ring_times.append(time.monotonic() - t)
    from routing.report import routing_report

    t = time.monotonic()
    rep = routing_report(cur.tables)
    report_s = time.monotonic() - t
    return {
        "tables_build_s": round(build_s, 4),
        "report_s": round(report_s, 3),
        "report_ca_pairs": rep["ca_pairs"],
        "report_credit_loop": rep["credit_loops"]["found"],
        "report_unbalanced_switches": len(rep["unbalanced_switches"]),
        "job_hosts": len(hosts),
        "rails": len(rails),
        "pairs": pairs,
        "all_to_all_s": round(statistics.median(times), 4),
        "all_to_all_spread_s": _spread(times),
        "ring_pair_paths_s": round(statistics.median(ring_times), 4),
        "ports_loaded": len(loads or {}),
        "unrouted": unrouted,
    }


def bench_rail_job(hosts: int, rails: int, runs: int) -> dict:
    """Part 2 on a generated rail pod of ``hosts`` hosts: the all-to-all job on all of them."""
    from lab import netgen
    from routing.services.collect import collect_routes

    lab, fabric, out = _lab_fabric(f"rail-pod-{hosts}", netgen.rail_pod(hosts, rails))
    try:
        t = time.monotonic()
        snap = collect_routes(fabric, reason="bench")
        out.update(
            {
                "first_collect_s": round(time.monotonic() - t, 3),
                "source": snap.source,
                "warnings": snap.warnings,
                "switches": snap.switches,
            }
        )
        out["paths"] = bench_paths(fabric, runs, max_hosts=hosts)
        return out
    finally:
        lab.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="small fabrics, seconds (CI)")
    ap.add_argument("--runs", type=int, default=None, help="alternating runs (default 7, tiny 3)")
    ap.add_argument("--topology", help="netfile/ibnetdiscover file (.gz ok); default Selene compute")
    ap.add_argument("--rail-hosts", type=int, default=None, help="hosts of the rail-pod job (0: skip)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    import benchkit

    watch = benchkit.LoadWatch()
    if not args.json:
        print(f"load average (1 min) at start: {watch.start['1m']}", flush=True)
    _django()
    from lab import netgen

    runs = args.runs or (3 if args.tiny else 7)
    if args.tiny:
        name, text = "tree-3x2", netgen.fat_tree_2level(3, 2, 2)
        rail_hosts, rails = (args.rail_hosts if args.rail_hosts is not None else 16), 2
    elif args.topology:
        path = Path(args.topology)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        name = path.name.split(".")[0].replace("_", "-")[:60]
        rail_hosts, rails = (args.rail_hosts if args.rail_hosts is not None else 1024), 2
    else:
        realdata = Path(os.environ.get("WEFT_REALDATA", "/work/shared/realdata"))
        text = gzip.decompress(
            (realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz").read_bytes()
        ).decode()
        name = "selene-compute"
        rail_hosts, rails = (args.rail_hosts if args.rail_hosts is not None else 1024), 2
    result = {"topology": name, "runs": runs, "collect": bench_collect(name, text, runs)}
    if rail_hosts:
        result["rail_job"] = bench_rail_job(rail_hosts, rails, runs)
    from django.db import connection

    result.update(watch.verdict())  # load (start, end, peak) and quiet
    result.update(
        {
            "database": connection.vendor,
            "ratio": result["collect"]["ratio"],
            "ratio_target": 0.25,
            "rail_job_all_to_all_s": result.get("rail_job", {}).get("paths", {}).get("all_to_all_s"),
            "rail_job_target_s": 1.0,
        }
    )
    if not args.json:
        print(f"load average (1 min) at end: {result['load']['end']['1m']}", flush=True)
        print(json.dumps(result, indent=1), flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
