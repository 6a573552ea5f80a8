"""Counter-sweep benchmark: full Weft sweep vs a bare ``ibqueryerrors --data``, on the same lab fabric.

For each topology (default: the Selene compute fabric from ``$WEFT_REALDATA`` — 666 switches,
4,341 CAs — and a generated 2,048-host 3-level HDR fat tree) it:

1. starts the lab (ibsim + OpenSM) on the topology and discovers it into Weft (``fabric.services``);
2. runs one warm-up sweep, then ``--runs`` times: a bare ``ibqueryerrors --data`` (the baseline) and
   a full sweep (``poll_fabric``: collect + rates + store + commit + publish through the
   ``sweep_committed`` listeners: heatmap producer, alarms), alternating so both see the same load;
   medians of each;
3. measures history storage: the growth of the ``telemetry_counterchunk`` relation (table + indexes +
   TOAST on PostgreSQL; data + 40 bytes/row on SQLite) per sweep, (a) for the lab's own sweeps and
   (b) worst case, random incompressible rates on every port; scaled to 30-s sampling and 1,000 nodes.

The end-to-end websocket latency comes from ``bench/ws_latency.py``'s ``measure(clients=100)``
(``--ws`` to run it; null otherwise). Use PostgreSQL for numbers that mean something:
``DATABASE_URL=postgresql://... REDIS_URL=redis://... SECRET_KEY=... python bench/sweep.py --json``.

``python bench/sweep.py [--topology PATH] [--fat-tree-hosts N] [--runs K] [--ws] [--tiny] --json``
(``--tiny``: an 8-host fat tree, one run: seconds, the bench runs). The database is a scratch one
(SQLite in a temporary folder, or a new database on ``DATABASE_URL``'s PostgreSQL server), dropped
at the end; SIGTERM stops the lab and drops it too; the last
line is a JSON object with at least ``ports``, ``sweep_s``, ``ibqueryerrors_s``, ``ratio`` (and its
spread over the alternating pairs), ``collect_s`` (to the last MAD answer), ``after_collect_s``,
``mads_per_port``, ``mads_per_s`` (MADs the poller sent over the collect seconds) beside
``ceiling_mads_per_s`` (ibsim's own pipelined ceiling: the same PortCounters MADs sent as a burst
by a bare madpoll child, best of 3) and their quotient ``mads_per_s_of_ceiling`` (a figure that
holds on any machine, unlike the ratio to the latency-bound diags),
``port_state_fallback_mads_per_sweep``, ``load`` (load averages at start and end), ``quiet``
(false when the 1-minute load at start was above 0.5),
``ws_latency_p95_s``, ``bytes_per_hour_per_1000_nodes`` (of the first topology), and ``topologies``
with every topology's numbers (``port_state_fallback_mads``: the extra SMPs of one port-state
fallback read, ``fabric.services.notices``). Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import benchkit

ROOT = benchkit.ROOT

SAMPLING_S = 30.0


def _relation_bytes() -> int:
    from django.db import connection

    from telemetry.models import CounterChunk

    table = CounterChunk._meta.db_table
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("SELECT pg_total_relation_size(%s)", [table])
            return int(cur.fetchone()[0])
        cur.execute(f"SELECT COALESCE(SUM(LENGTH(data)), 0) + 40 * COUNT(*) FROM {table}")
        return int(cur.fetchone()[0])


def _per_1000_nodes_per_hour(bytes_per_sweep: float, nodes: int) -> float:
    return bytes_per_sweep * (3600.0 / SAMPLING_S) * 1000.0 / nodes


def _worst_case_storage(fabric, port_ids: list[int], sweeps: int = 10) -> float:
    """Bytes per sweep with random rates on every port (incompressible), measured on the table."""
    from telemetry.models import CounterChunk
    from telemetry.services import history

    rng = random.Random(1)
    t0 = 2_000_000_000
    before = _relation_bytes()
    for k in range(sweeps):
        entries = [
            (
                pid,
                (rng.uniform(0, 2.5e10), rng.uniform(0, 2.5e10), rng.uniform(0, 1e6), rng.randrange(0, 3), 0),
            )
            for pid in port_ids
        ]
        CounterChunk.objects.bulk_create(
            history.build_chunks(fabric.pk, t0 + 30 * k, entries), batch_size=500
        )
    after = _relation_bytes()
    CounterChunk.objects.filter(fabric=fabric, t__gte=t0).delete()
    return (after - before) / sweeps


def _mads_sent(stats: str) -> int | None:
    """MADs sent by the poller, from its statistics line (``madpoll: sent=N ...``; several for
    several poller processes)."""
    found = re.findall(r"sent=(\d+)", stats or "")
    return sum(int(x) for x in found) if found else None


def ceiling(lab, fabric, bursts: int = 3, window: int = 64, min_mads: int = 20000) -> dict:
    """ibsim's own pipelined ceiling: the sweep's PortCounters MADs (one per linked port, the LIDs
    stored for the fabric, PortCounters and PortCountersExtended: two MADs a port, as the sweep
    sends them; repeated up to ``min_mads``) sent as a burst straight from a ``telemetry.collectors.madpoll`` child
    (``window`` outstanding, as the sweep's poller) with nothing of Weft around it: no parse, no
    store. Best of ``bursts``: ``{"mads", "seconds", "mads_per_s"}`` (``mads_per_s`` None when
    the child printed no statistics line)."""
    from django.db.models import Q

    from fabric.models import Port

    linked = Q(link_as_a__isnull=False) | Q(link_as_b__isnull=False)
    lines = []
    for port_num, lid, node_lid in Port.objects.filter(linked, node__fabric=fabric, port_num__gte=1)\
            .distinct().values_list("port_num", "lid", "node__lid"):  # fmt: skip
        if lid or node_lid:
            lines.append(f"Q {lid or node_lid} {port_num} 1\n")  # PortCounters + Extended, as the sweep
    # a burst of at least ``min_mads`` (the list repeated on a small fabric): the child's set-up
    # time is then small beside the MADs' time
    lines *= max(1, min_mads // max(2 * len(lines), 1))
    best: dict = {"mads": 0, "seconds": None, "mads_per_s": None}
    for _ in range(bursts):
        proc = subprocess.run(
            [sys.executable, "-m", "telemetry.collectors.madpoll", "--window", str(window)],
            input="".join(lines).encode(), env={**os.environ, **lab.tool_env}, cwd=ROOT,
            capture_output=True, timeout=600,
        )  # fmt: skip
        stats = proc.stderr.decode(errors="replace")
        sent, elapsed = re.search(r"sent=(\d+)", stats), re.search(r"elapsed_s=([\d.]+)", stats)
        if proc.returncode != 0 or not sent or not elapsed:
            best["error"] = f"madpoll exited {proc.returncode}: {stats[-300:]}"
            continue
        rate = int(sent.group(1)) / max(float(elapsed.group(1)), 1e-9)
        if best["mads_per_s"] is None or rate > best["mads_per_s"]:
            best = {"mads": int(sent.group(1)), "seconds": float(elapsed.group(1)), "mads_per_s": round(rate)}
    return best


def bench_topology(name: str, netfile: str, runs: int, kit: benchkit.Bench | None = None) -> dict:
    """Run the benchmark on one netfile (text); returns its numbers (seconds, bytes)."""
    from fabric.models import Fabric, Node, Port
    from fabric.services.discovery import discover
    from fabric.services.notices import fallback_targets
    from lab import Lab
    from telemetry.models import PortCounters, Sweep
    from telemetry.services import publisher
    from telemetry.services.sweep import poll_fabric

    t = time.monotonic()
    lab = Lab(netfile)
    if kit is not None:
        kit.stops(lab)  # stopped on SIGTERM too
    lab.start(timeout=900)
    lab_s = time.monotonic() - t
    try:
        Fabric.objects.filter(name=name).delete()
        fabric = Fabric.objects.create(name=name, tool_env=lab.tool_env, discovery_timeout_s=900)
        t = time.monotonic()
        discover(fabric, timeout=900)
        discovery_s = time.monotonic() - t
        fabric.refresh_from_db()
        nodes = Node.objects.filter(fabric=fabric).count()
        ports = Port.objects.filter(node__fabric=fabric, port_num__gte=1).count()

        # Baseline and sweeps alternate (iqe, sweep, iqe, sweep...) so both see the same machine load
        # and the same OpenSM activity; medians of each.
        baseline = []
        iqe_argv = ["ibqueryerrors", "--data"]
        iqe_note = ""
        warm = poll_fabric(fabric)
        before = _relation_bytes()
        sweeps = []
        publish_lag: list[float] = []
        publisher.flush(60)
        for _ in range(runs):
            t = time.monotonic()
            res = lab.run(iqe_argv, timeout=900, check=False)
            if res.returncode < 0 and "--skip-sl" not in iqe_argv:
                # seen once on the generated 2,048-host tree: ibqueryerrors died (SIGSEGV) in its SA
                # PathRecord (SL) query; --skip-sl measures the same counter reads without it
                iqe_note = (
                    f"ibqueryerrors --data died with signal {-res.returncode}; baseline is --data --skip-sl"
                )
                iqe_argv = ["ibqueryerrors", "--data", "--skip-sl"]
                t = time.monotonic()
                res = lab.run(iqe_argv, timeout=900, check=False)
            baseline.append(time.monotonic() - t)
            if res.returncode not in (0, 1):
                raise RuntimeError(f"{' '.join(iqe_argv)} exited {res.returncode}: {res.stderr[-500:]}")
            sweeps.append(poll_fabric(fabric))
            # the heatmap/alarm publication runs after the sweep returns (publisher thread): let
            # it finish before the next baseline run, and say how long it took
            t = time.monotonic()
            publisher.flush(60)
            publish_lag.append(time.monotonic() - t)
        iqe_ports = None
        for line in res.stdout.splitlines():
            if "ports checked" in line:
                iqe_ports = int(line.split()[1])
        lab_bytes_per_sweep = (_relation_bytes() - before) / runs
        durations = [s.duration_s for s in sweeps]
        port_ids = list(
            PortCounters.objects.filter(port__node__fabric=fabric).values_list("port_id", flat=True)
        )
        worst = _worst_case_storage(fabric, port_ids)
        sweep_s = statistics.median(durations)
        iqe_s = statistics.median(baseline)
        last = sweeps[-1]
        collect = [s.timings["collect_s"] for s in sweeps]
        after = [s.timings["after_collect_s"] for s in sweeps]
        mads = [_mads_sent(s.timings["collector"]) for s in sweeps]
        ratios = [d / b for d, b in zip(durations, baseline, strict=True)]
        # MADs per second of the sweep's collect phase against ibsim's own pipelined ceiling: a
        # figure that means something on any machine (the diags' ratio follows its latency)
        top = ceiling(lab, fabric)
        mads_per_s = (
            round(statistics.median(mads) / statistics.median(collect))
            if all(mads) and all(collect)
            else None
        )
        out = {
            "topology": name,
            "nodes": nodes,
            "ports": ports,
            "ports_read": last.ports,
            "stale": last.stale,
            "ibqueryerrors_ports_checked": iqe_ports,
            "sweep_s": round(sweep_s, 4),
            "sweep_runs_s": [round(d, 4) for d in durations],
            "first_sweep_s": warm.duration_s,
            "timings": getattr(last, "timings", None),
            "ibqueryerrors_s": round(iqe_s, 4),
            "ibqueryerrors_runs_s": [round(b, 4) for b in baseline],
            "ibqueryerrors_argv": " ".join(iqe_argv),
            "ibqueryerrors_note": iqe_note,
            "ratio": round(sweep_s / iqe_s, 3),
            # per alternating pair (sweep / the baseline run just before it): the spread of the ratio
            "ratio_runs": [round(r, 3) for r in ratios],
            "ratio_spread": [round(min(ratios), 3), round(max(ratios), 3)],
            "sweep_spread_s": [round(min(durations), 4), round(max(durations), 4)],
            "ibqueryerrors_spread_s": [round(min(baseline), 4), round(max(baseline), 4)],
            # collect_s: sweep start to the last MAD answer; after_collect_s: from there to the
            # sweep's return (last chunk, unread ports, history, Sweep row, commit); medians
            "collect_s": round(statistics.median(collect), 4),
            "collect_runs_s": collect,
            "after_collect_s": round(statistics.median(after), 4),
            "after_collect_runs_s": after,
            "after_collect_share": round(statistics.median(after) / statistics.median(collect), 3),
            # MADs the poller sent per port read (retries included; ClassPortInfo reads are cached)
            "mads_per_sweep": mads,
            "mads_per_port": round(statistics.median(mads) / max(last.ports, 1), 3) if all(mads) else None,
            "mads_per_s": mads_per_s,
            "ceiling_mads_per_s": top["mads_per_s"],
            "ceiling": top,
            "mads_per_s_of_ceiling": round(mads_per_s / top["mads_per_s"], 3)
            if mads_per_s and top["mads_per_s"]
            else None,
            # the heatmap and alarm publication after the sweep (publisher thread), seconds
            "publish_after_sweep_s": [round(x, 4) for x in publish_lag],
            "lab_start_s": round(lab_s, 2),
            "discovery_s": round(discovery_s, 2),
            "history_bytes_per_sweep_lab": round(lab_bytes_per_sweep),
            "history_bytes_per_sweep_worst": round(worst),
            "bytes_per_hour_per_1000_nodes": round(_per_1000_nodes_per_hour(worst, nodes)),
            "bytes_per_hour_per_1000_nodes_lab": round(_per_1000_nodes_per_hour(lab_bytes_per_sweep, nodes)),
            "sweeps_status": [s.status for s in sweeps],
            # the port-state fallback (no SM notices): one PortInfo SMP per port it reads and one
            # NodeInfo per switch, each WEFT_PORT_STATE_INTERVAL_S (i.e. extra MADs per sweep at the
            # default interval, equal to the poll interval); with notices it costs nothing
            # (bench/port_states.py)
            "port_state_fallback_mads": (fb := sum(len(p) + 1 for p in fallback_targets(fabric).values())),
            "port_state_fallback_mads_per_sweep": fb,
            "port_state_fallback_mads_per_port": round(fb / max(ports, 1), 3),
        }
        Sweep.objects.filter(fabric=fabric).delete()
        fabric.delete()
        return out
    finally:
        lab.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--topology", help="netfile/ibnetdiscover file (.gz ok); default Selene compute + fat tree"
    )
    ap.add_argument(
        "--fat-tree-hosts", type=int, default=2048, help="hosts of the generated fat tree (0: skip)"
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--ws", action="store_true", help="also run bench/ws_latency.py measure(clients=100)")
    ap.add_argument("--tiny", action="store_true", help="seconds: a 2-level fat tree of 8 hosts, 1 run")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    kit = benchkit.Bench("sweep")
    with kit.scratch_database(benchkit.pg_server_from_env()):
        benchkit.django_setup()
        out = run(args, kit)
    print(json.dumps(kit.finish(out)))
    return 0


def run(args, kit: benchkit.Bench) -> dict:
    """The topologies of ``args`` benched on the scratch database: the last line's object."""
    from django.db import connection

    from lab import netgen

    todo: list[tuple[str, str]] = []
    if args.tiny:
        args.runs = 1
        todo.append(("fat-tree-tiny", netgen.fat_tree_2level(2, 2, 2)))
    elif args.topology:
        path = Path(args.topology)
        text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
        todo.append((path.name.split(".")[0].replace("_", "-")[:60], text))
    else:
        realdata = Path(os.environ.get("WEFT_REALDATA", "/work/shared/realdata"))
        selene = realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"
        todo.append(("selene-compute", gzip.decompress(selene.read_bytes()).decode()))
        if args.fat_tree_hosts:
            hosts = args.fat_tree_hosts
            # 3-level HDR fat tree: pods of 8 leaves x 16 hosts, 16 spines per pod, 8 cores per group
            pods = max(1, hosts // 128)
            todo.append((f"fat-tree-{hosts}", netgen.fat_tree_3level(pods, 8, 16, 128, 16)))
    results = []
    for name, text in todo:
        r = bench_topology(name, text, args.runs, kit)
        results.append(r)
        if not args.json:
            print(json.dumps(r, indent=1), flush=True)
    ws = None
    if args.ws:
        try:
            from bench.ws_latency import measure

            ws = measure(clients=100)
        except Exception as exc:  # the latency bench is the heatmap engineer's; report, don't die
            ws = {"error": str(exc)}
    first = results[0]
    return {
        "database": connection.vendor,
        "ports": first["ports"],
        "sweep_s": first["sweep_s"],
        "ibqueryerrors_s": first["ibqueryerrors_s"],
        "ratio": first["ratio"],
        "ratio_spread": first["ratio_spread"],
        "collect_s": first["collect_s"],
        "after_collect_s": first["after_collect_s"],
        "after_collect_share": first["after_collect_share"],
        "mads_per_port": first["mads_per_port"],
        "mads_per_s": first["mads_per_s"],
        "ceiling_mads_per_s": first["ceiling_mads_per_s"],
        "mads_per_s_of_ceiling": first["mads_per_s_of_ceiling"],
        "port_state_fallback_mads_per_sweep": first["port_state_fallback_mads_per_sweep"],
        "ws_latency_p95_s": ws.get("p95_s") if isinstance(ws, dict) else None,
        "ws_latency": ws,
        "bytes_per_hour_per_1000_nodes": first["bytes_per_hour_per_1000_nodes"],
        "topologies": results,
    }


if __name__ == "__main__":
    sys.exit(main())
