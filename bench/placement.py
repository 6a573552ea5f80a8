"""Benchmark: placement decision time and quality against a naive first-fit baseline.

A synthetic 2-level fat tree (``--hosts`` × ``--per-host`` GPUs, default 2,048 × 8 = 16,384,
``--hosts-per-leaf`` 32: 64 leaves) built directly as a :class:`~scheduler.locality.Locality`
(``weft.testing.localities``; no database). Each trial draws a new free state at ``--busy``
(default 50 %) random fragmentation and asks for one ``--job``-GPU job (default 2,048) as compact
as possible:

* ``--fragmentation leaf`` (default): each leaf gets a busy fraction drawn uniformly in
  [2·busy − 1, 1] or [0, 2·busy] (mean ``busy``), and each GPU of its hosts is busy with that
  probability — some leaves nearly full, some nearly empty, as a cluster running jobs of mixed
  sizes looks;
* ``--fragmentation uniform``: every GPU busy with probability ``busy`` (every leaf about half
  free: the lower bound is then close to what any order achieves).

Per trial, :func:`scheduler.placement.place` and :func:`scheduler.placement.first_fit` (hosts in
name order) are timed on the same state, alternating which goes first. The engine's decision is
checked (GPUs placed, never more than free, units spanned = ``Locality.span``).

The last line of stdout is a JSON object: ``p50_ms``, ``p99_ms`` (wall, per decision; also
``p50_cpu_ms``/``p99_cpu_ms``: this thread's CPU, steadier under load), ``max_ms``,
``cold_ms`` (the first decision on a new Locality, index build included), ``leaves_spanned`` and
``lower_bound`` (medians over trials; ``*_range`` [min, max]), ``at_lower_bound`` (fraction of
trials whose leaves spanned equal the lower bound), ``tier`` (median tier spanned),
``baseline_p50_ms``, ``baseline_p99_ms``, ``baseline_leaves_spanned`` (median; ``*_range``),
``pass_1000_s`` and ``submit_to_placed_p99_ms`` (null: the queue pass and the PostgreSQL end to
end come with the queue; ``notes`` says so), and ``load`` (``uptime`` before and after). Not a
test: nothing is asserted beyond the decisions' validity.

    python bench/placement.py [--trials 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BASE))

from scheduler.placement import FreeState, Request, first_fit, place  # noqa: E402
from weft.testing.localities import fat_tree  # noqa: E402


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def free_state(loc, rng: random.Random, busy: float, mode: str) -> dict[str, int]:
    """Free GPUs per host at ``busy`` fragmentation (see the module docstring)."""
    free = {}
    for unit in loc.units():
        if mode == "uniform":
            q = busy
        elif busy >= 0.5:
            q = rng.uniform(2 * busy - 1, 1)
        else:
            q = rng.uniform(0, 2 * busy)
        for h in unit.hosts:
            n = loc.hosts[h].gpus
            free[h] = sum(1 for _ in range(n) if rng.random() >= q)
    return free


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))]


def timed(fn, *args):
    c0, t0 = time.thread_time(), time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2048)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=32)
    ap.add_argument("--job", type=int, default=2048, help="GPUs the job asks for")
    ap.add_argument("--busy", type=float, default=0.5, help="fraction of GPUs busy")
    ap.add_argument("--fragmentation", choices=["leaf", "uniform"], default="leaf")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args()

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    load_before = uptime()
    leaves = args.hosts // args.hosts_per_leaf
    loc = fat_tree(leaves, args.hosts_per_leaf, gpus=args.per_host)
    rng = random.Random(args.seed)
    req = Request(args.job)
    say(
        f"fat tree: {leaves} leaves × {args.hosts_per_leaf} hosts × {args.per_host} GPUs; job {args.job} GPUs"
    )

    wall, cpu, bwall, bcpu = [], [], [], []
    spanned, bounds, tiers, base_spanned, busy_seen = [], [], [], [], []
    cold_ms = None
    for trial in range(args.trials):
        gpus = free_state(loc, rng, args.busy, args.fragmentation)
        busy_seen.append(1 - sum(gpus.values()) / (args.hosts * args.per_host))
        free = FreeState(gpus=gpus)
        order = ("engine", "baseline") if trial % 2 == 0 else ("baseline", "engine")
        for which in order:
            if which == "engine":
                d, ms, cms = timed(place, loc, free, req)
                if cold_ms is None:
                    cold_ms = ms
                    continue  # the first call builds the index: reported apart
                wall.append(ms)
                cpu.append(cms)
            else:
                b, ms, cms = timed(first_fit, loc, free, req)
                bwall.append(ms)
                bcpu.append(cms)
        if not d.ok or not b.ok:
            raise SystemExit(f"trial {trial}: not placed ({d.code}/{b.code}): {d.reasons}")
        assert sum(d.placed.values()) == args.job and all(n <= gpus[h] for h, n in d.placed.items())
        assert loc.span(d.placed) == (d.tier, d.units)
        spanned.append(d.units)
        bounds.append(d.lower_bound)
        tiers.append(d.tier)
        base_spanned.append(b.units)
        if trial % 50 == 0:
            say(
                f"trial {trial}: {ms:.2f} ms, leaves {d.units} (lower bound {d.lower_bound}), first fit {b.units}"
            )

    def rng_of(v):
        return [min(v), max(v)]

    out = {
        "gpus": args.hosts * args.per_host,
        "hosts": args.hosts,
        "leaves": leaves,
        "job_gpus": args.job,
        "busy": args.busy,
        "busy_observed": round(statistics.mean(busy_seen), 4),
        "fragmentation": args.fragmentation,
        "trials": args.trials,
        "p50_ms": round(statistics.median(wall), 3),
        "p99_ms": round(pct(wall, 0.99), 3),
        "max_ms": round(max(wall), 3),
        "p50_cpu_ms": round(statistics.median(cpu), 3),
        "p99_cpu_ms": round(pct(cpu, 0.99), 3),
        "cold_ms": round(cold_ms, 3),
        "leaves_spanned": statistics.median(spanned),
        "leaves_spanned_range": rng_of(spanned),
        "lower_bound": statistics.median(bounds),
        "lower_bound_range": rng_of(bounds),
        "at_lower_bound": sum(1 for s, b in zip(spanned, bounds, strict=True) if s == b) / len(spanned),
        "tier": statistics.median(tiers),
        "baseline_p50_ms": round(statistics.median(bwall), 3),
        "baseline_p99_ms": round(pct(bwall, 0.99), 3),
        "baseline_p99_cpu_ms": round(pct(bcpu, 0.99), 3),
        "baseline_leaves_spanned": statistics.median(base_spanned),
        "baseline_leaves_spanned_range": rng_of(base_spanned),
        "pass_1000_s": None,
        "submit_to_placed_p99_ms": None,
        "notes": [
            "pass_1000_s and submit_to_placed_p99_ms: the queue pass and the end-to-end PostgreSQL "
            "path come with the queue (issue 12); null until then",
        ],
        "load": {"before": load_before, "after": uptime()},
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
