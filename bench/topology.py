"""Benchmark: topology parse and ingest against ``ibnetdiscover``'s own time (ratios, not a timed test).

On the Selene compute fabric (``$WEFT_REALDATA/ibnetdiscover/selene_compute.ibnetdiscover.txt.gz``,
666 switches, 4,341 CAs, 12,852 links) or ``--topology PATH``, on PostgreSQL (a scratch database
created and dropped here, ``--pg-url`` server). Every figure is the median of ``--runs`` runs,
the kinds of run alternating (one of each per round, so a load change hits all alike), with its
spread in ``spread`` (``[min, max]``):

* ``parse_s``: :func:`fabric.parsers.detect_and_parse` on the text;
* ``ingest_s``: ingest into an empty fabric (a new fabric each round), ``ingest_rows``, and
  ``ingest_breakdown`` (median seconds: ``plan`` = row values + digests, ``nodes``/``ports``/
  ``links`` = the COPYs and their Python, ``commit`` = the deferred foreign-key checks and the
  commit, ``other`` = the rest: lock, reads, events, Discovery row);
* ``reingest_s``/``reingest_rows``: the same text again through the import service
  (``import_topology_text``): recognised by its ``source_digest`` before parsing
  (``reingest_same_source``; target: 0 rows); ``reingest_parsed_s``/``reingest_parsed_rows``: the
  same text parsed and diffed through the per-node digests (the cost of a text with a far-away
  change, less its writes);
* ``changed_s``/``changed_rows``: a re-import with one switch port down (one switch-to-switch
  cable gone from the text: ``link.down`` and two ``port.state_changed``), parse included; each
  round then restores the cable (not timed);
* ``parse_cpu_s``, ``ingest_cpu_s``, ``reingest_cpu_s``, ``changed_cpu_s``: this process's CPU
  seconds for the same (the Python side alone; steady under load, unlike the wall times);
* ``ibnetdiscover_s``: the real ``ibnetdiscover`` on the same fabric loaded into the lab (ibsim +
  OpenSM + umad2sim); ``lab_start_s`` how long the lab took to come up;
* ``live_s``: :func:`fabric.services.discovery.discover` of that lab fabric (ibnetdiscover + sminfo
  + parse + unchanged ingest), after one first live discovery, alternating with ``ibnetdiscover_s``;
  ``live_collect_s`` the collector alone (ibnetdiscover + sminfo), once;
* ``ratio`` = (parse_s + ingest_s) / ibnetdiscover_s (target ≤ 1.0), plus ``parse_ratio``,
  ``ingest_ratio``, ``reingest_ratio`` (target ≤ 0.25), ``changed_ratio`` and ``live_ratio``
  (target ≤ 1.2), each over ibnetdiscover_s.

Measured on a quiet machine (load average ~1, 2026-12-02, 3 alternating runs, medians): parse
0.24 s + first ingest 0.91 s (breakdown: plan 0.11, nodes 0.09, ports 0.27, links 0.09, commit
0.27, other 0.06) against ``ibnetdiscover`` 2.69 s (2.60-2.73) in the same lab: ``ratio`` 0.43;
same-source re-import 0.036 s (``reingest_ratio`` 0.013; parsed and diffed 0.46 s); one switch
port down 0.47 s, 6 rows (``changed_ratio`` 0.17); live discovery unchanged 2.71 s
(``live_ratio`` 1.01, 0 rows).

Where the time goes (Selene; issue 16, measured on a machine shared by four sessions, load 8-11
on 2 cores, so read the CPU figures, which load barely moves; wall times there are 3-5x them):

* parse: ~0.27-0.30 s CPU (main: ~0.65 s). One pass of per-line regexes; the cyclic GC is paused
  (``fabric.parsers.records.gc_paused``), which was half of it: every collection walked the ~200k
  records and tuples made so far. What is left is Python per port line (25.7k, each cable twice).
* first ingest: ~0.36 s CPU in this process (main: ~0.57 s), the rest is PostgreSQL. Median wall
  breakdown of one loaded run (``ingest_breakdown``, 4.5 s): ``plan`` 0.59 (row values + digests,
  ~0.12 s of CPU), ``nodes`` 0.53, ``ports`` 1.52, ``links`` 0.43 (COPY with id reservation and
  index upkeep; ports have 7 indexes, nodes 10), ``commit`` 1.09 (PostgreSQL runs the ~70k
  deferred foreign-key checks, one per Node/Port/Link reference, at commit), ``other`` 0.12. The
  ANALYZE after a bulk load is gone: the next discovery no longer reads the fabric back.
* unchanged rediscovery: the text's ``source_digest`` (one pass over its lines) + the latest
  Discovery + one EXISTS over the nodes (a cleared digest or an unreachable mark) + the Discovery
  row; no parse. Without the shortcut (``reingest_parsed_s``): parse + ``plan`` (~0.13 s CPU) +
  one read of the fabric's 5k node digests + the Discovery row: ~0.43 s CPU in all, no port or
  link row read.
* one switch port down: the same plus the diff of the two nodes whose digest moved (the switch
  and its peer): 6 rows written (link deleted, two ports Down, three events).

Other apps' ``discovery_committed`` listeners are detached so the numbers are the fabric ingest's.

    python bench/topology.py [--topology PATH] [--runs 5] [--no-lab] [--tiny] [--json]

The last line of stdout is the JSON object, with each side's seconds beside every ratio (``*_s``,
``ibnetdiscover_s``), ``load`` (load averages at start and end) and ``quiet`` (false when the
1-minute load at start was above 0.5). ``--tiny``: a 15-node fabric, one run (seconds: the bench
runs). The scratch database is dropped and the lab stopped on SIGTERM too.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import statistics
import time
from collections import defaultdict
from pathlib import Path

import benchkit

REALDATA = benchkit.realdata()
SELENE = REALDATA / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"


def read(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


_SW_PORT = re.compile(r'^\[(\d+)\]\s*"(S-[0-9a-fA-F]+)"\[(\d+)\]', re.M)
_SW_HEAD = re.compile(r'^Switch\s*\d+\s*"(S-[0-9a-fA-F]+)"', re.M)


def one_switch_port_down(text: str) -> str:
    """``text`` without one switch-to-switch cable (both of its port lines): the first such line
    of the first switch that has one, and its mirror line in the remote switch's record.

    Raises:
        ValueError: the text has no switch-to-switch cable listed from both ends.
    """
    lines = text.split("\n")
    owner = None
    for i, line in enumerate(lines):
        head = _SW_HEAD.match(line)
        if head:
            owner = head.group(1)
            continue
        m = _SW_PORT.match(line)
        if m and owner and m.group(2) != owner:
            lport, remote, rport = m.group(1), m.group(2), m.group(3)
            mirror = re.compile(rf'^\[{rport}\]\s*"{owner}"\[{lport}\]')
            in_remote = False
            for j, other in enumerate(lines):
                h = _SW_HEAD.match(other)
                if h:
                    in_remote = h.group(1) == remote
                elif in_remote and mirror.match(other):
                    return "\n".join(x for k, x in enumerate(lines) if k not in (i, j))
    raise ValueError("no switch-to-switch cable listed from both ends")


class Phases:
    """Seconds spent in named functions of the ingest during one ingest (the functions are wrapped
    for the bench only, where ``fabric.services.ingest.topology.ingest_topology`` calls them)."""

    WRAPPED = {"plan_topology": "plan", "sync_nodes": "nodes", "sync_ports": "ports", "sync_links": "links"}

    def __init__(self):
        from django.db import connection

        from fabric.services.ingest import topology as ingest

        self.times: dict[str, float] = defaultdict(float)
        for name, label in self.WRAPPED.items():
            setattr(ingest, name, self._timed(getattr(ingest, name), label))
        connection.commit = self._timed(connection.commit, "commit")

    def _timed(self, fn, label):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.times[label] += time.perf_counter() - t0

        return wrapper

    def take(self, total: float) -> dict[str, float]:
        out = dict(self.times)
        out["other"] = total - sum(out.values())
        self.times.clear()
        return out


class Clock:
    """``with clock(name):`` appends the block's wall seconds to ``times[name]`` and this
    process's CPU seconds to ``times[name.replace("_s", "_cpu_s")]`` (the Python side alone,
    which the machine's load barely moves; the wall time also holds PostgreSQL's work)."""

    def __init__(self, times: dict[str, list[float]]):
        self.times = times

    @contextlib.contextmanager
    def __call__(self, name: str):
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.times[name].append(time.perf_counter() - w0)
            self.times[name.replace("_s", "_cpu_s")].append(time.process_time() - c0)


def median(values: list[float]) -> float:
    return round(statistics.median(values), 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", type=Path, default=SELENE)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pg-url", default=benchkit.DEFAULT_PG, help="PostgreSQL server (WEFT_BENCH_PG)")
    ap.add_argument("--tiny", action="store_true", help="seconds: a 15-node fabric, 1 run")
    ap.add_argument("--no-lab", action="store_true", help="skip the lab (ibnetdiscover_s, live_s)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args()
    if args.tiny:
        args.topology, args.runs = REALDATA / benchkit.TINY_TOPOLOGY, 1
    runs = max(1, args.runs)

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    text = read(args.topology)
    changed_text = one_switch_port_down(text)
    kit = benchkit.Bench("topology")
    os.environ.pop("REDIS_URL", None)  # embedded mode otherwise: no broker needed for the bench
    with kit.scratch_database(args.pg_url):
        benchkit.django_setup()
        out = run(args, kit, text, changed_text, runs, say)
    print(json.dumps(kit.finish(out)))
    return 0


def run(args, kit: benchkit.Bench, text: str, changed_text: str, runs: int, say) -> dict:
    """The measurements (module docstring) on the scratch database; the lab is stopped when the
    bench ends, a SIGTERM included."""
    from fabric.models import Fabric
    from fabric.parsers import detect_and_parse
    from fabric.services.ingest import import_topology_text, ingest_topology, source_digest
    from fabric.signals import discovery_committed

    out: dict = {"topology": args.topology.name, "runs": runs}
    spread: dict[str, list[float]] = {}

    def record(name: str, values: list[float]) -> None:
        out[name] = median(values)
        spread[name] = [round(min(values), 4), round(max(values), 4)]

    discovery_committed.receivers = []
    discovery_committed.sender_receivers_cache.clear()
    phases = Phases()
    name = args.topology.name
    times: dict[str, list[float]] = defaultdict(list)
    breakdowns: list[dict[str, float]] = []
    clock = Clock(times)
    for run in range(runs):
        with clock("parse_s"):
            topo = detect_and_parse(text, name)

        fabric = Fabric.objects.create(name=f"bench-{run}")
        phases.take(0)
        with clock("ingest_s"):
            first = ingest_topology(fabric, topo, source="file", source_digest=source_digest(text, fabric))
        breakdowns.append(phases.take(times["ingest_s"][-1]))
        out["ingest_rows"] = first.rows_written

        # the import service's path: the same text is recognised before parsing
        with clock("reingest_s"):
            again = import_topology_text(fabric.name, text, filename=name)
        out["reingest_rows"] = again.rows_written
        out["reingest_same_source"] = bool(again.diff.get("same_source"))

        # the same text parsed and diffed through the node digests (what a text with only a
        # far-away change costs, less its few writes)
        with clock("reingest_parsed_s"):
            parsed = ingest_topology(fabric, detect_and_parse(text, name), source="file")
        out["reingest_parsed_rows"] = parsed.rows_written

        with clock("changed_s"):
            changed = import_topology_text(fabric.name, changed_text, filename=name, replace=True)
        out["changed_rows"] = changed.rows_written
        out["changed_diff"] = {"removed_links": changed.removed, "changed": changed.changed}
        # the cable is back (not timed)
        back = ingest_topology(fabric, topo, source="file", source_digest=source_digest(text, fabric))
        out["restored_rows"] = back.rows_written
    out.update(topo.counts())
    for key, values in times.items():
        record(key, values)
    out["ingest_breakdown"] = {
        k: median([b.get(k, 0.0) for b in breakdowns])
        for k in ("plan", "nodes", "ports", "links", "commit", "other")
    }
    say(f"parse: {out['parse_s']:.3f} s ({topo.counts()})")
    say(f"ingest (PostgreSQL, empty fabric): {out['ingest_s']:.3f} s, {out['ingest_rows']} rows, "
        f"breakdown {out['ingest_breakdown']}")  # fmt: skip
    say(f"unchanged re-import (same source): {out['reingest_s']:.3f} s, {out['reingest_rows']} rows; "
        f"parsed and diffed: {out['reingest_parsed_s']:.3f} s, {out['reingest_parsed_rows']} rows")  # fmt: skip
    say(f"one switch port down (parse included): {out['changed_s']:.3f} s, {out['changed_rows']} rows")

    if not args.no_lab:
        from fabric.collectors.tools import fabric_env, run_tool
        from fabric.services.discovery import discover
        from lab import Lab

        t0 = time.perf_counter()
        lab = kit.stops(Lab(args.topology))
        lab.start(timeout=900)
        out["lab_start_s"] = round(time.perf_counter() - t0, 2)
        say(f"lab up in {out['lab_start_s']} s")
        try:
            live = Fabric.objects.create(
                name="bench-live", tool_env=dict(lab.tool_env), discovery_timeout_s=900
            )
            env = fabric_env(live)
            from fabric.collectors.ibnetdiscover import collect_topology

            t0 = time.perf_counter()
            collected = collect_topology(live)
            out["live_collect_s"] = round(time.perf_counter() - t0, 4)
            out["live_collect_ibnetdiscover_s"] = collected.duration_s
            t0 = time.perf_counter()
            d = discover(live)
            out["live_first_s"] = round(time.perf_counter() - t0, 4)
            for _ in range(runs):
                res = run_tool(["ibnetdiscover"], env=env, timeout=900)
                if res.returncode != 0:
                    raise SystemExit(f"ibnetdiscover failed: {res.stderr[-500:]}")
                times["ibnetdiscover_s"].append(res.duration_s)
                t0 = time.perf_counter()
                d = discover(live)
                times["live_s"].append(time.perf_counter() - t0)
                out["live_rows"] = d.rows_written
            record("ibnetdiscover_s", times["ibnetdiscover_s"])
            record("live_s", times["live_s"])
            out["live_status"] = d.status
            out["live_counts"] = {k: d.counts[k] for k in ("switches", "cas", "routers", "links")}
            out["counts_match"] = all(out["live_counts"][k] == out[k] for k in out["live_counts"])
            say(f"ibnetdiscover: {out['ibnetdiscover_s']:.3f} s; live discovery: first "
                f"{out['live_first_s']:.3f} s, unchanged {out['live_s']:.3f} s ({d.rows_written} rows)")  # fmt: skip
        finally:
            lab.stop()
        ib = out["ibnetdiscover_s"]
        out["ratio"] = round((out["parse_s"] + out["ingest_s"]) / ib, 3)
        for key in ("parse", "ingest", "reingest", "reingest_parsed", "changed", "live"):
            out[f"{key}_ratio"] = round(out[f"{key}_s"] / ib, 3)
        say(f"ratio (parse + ingest) / ibnetdiscover = {out['ratio']}  (target <= 1.0)")
        say(
            f"parse {out['parse_ratio']}x, ingest {out['ingest_ratio']}x, re-ingest {out['reingest_ratio']}x "
            f"(target <= 0.25), changed {out['changed_ratio']}x, live discovery {out['live_ratio']}x "
            "(target <= 1.2) of ibnetdiscover"
        )
    out["spread"] = spread
    return out


if __name__ == "__main__":
    raise SystemExit(main())
