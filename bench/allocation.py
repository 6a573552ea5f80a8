"""Benchmark: GPU allocation throughput and latency on PostgreSQL, against a global-lock baseline.

A scratch PostgreSQL database (``--pg-url`` server; created and dropped here) gets ``--hosts``
× ``--per-host`` GPUs (default 2,048 × 8 = 16,384), ``--tenants`` tenants with two pools each
(quota 1.5×, guarantee 1× a fair share) and one shared pool. ``--clients`` threads (each its own
database connection) then send the same seeded request stream through
``pools.services.allocation``: whole-GPU requests of 1-8 GPUs in a random pool (10 % of them for
named GPUs of a hot set of 256: overlapping), each client keeping at most ``--hold`` allocations
and releasing its oldest beyond that.

* **concurrent**: the service as it is (pool row lock, GPUs in pk order with SKIP LOCKED);
* **baseline**: the same requests serialised through one global lock (a process-wide mutex
  around each call: one allocation or release at a time).

Runs alternate (``--rounds`` of each); medians are reported with the spread (min-max). After
every run: ``double_allocations`` (GPUs with more than one active whole-GPU item, or whose state
disagrees with the items) and ``quota_violations`` (pools above quota in any committed state a
monitor thread read, every 20 ms, or at the end).

    python bench/allocation.py [--clients 32] [--requests 100] [--rounds 2] [--tiny] [--json]

The last line of stdout is a JSON object: ``allocations_per_s``, ``p50_ms``, ``p99_ms`` (allocate
calls, all outcomes), ``double_allocations``, ``quota_violations``, ``baseline`` (same keys),
``ratio`` (concurrent / baseline allocations per second) with ``concurrent_wall_s`` and
``baseline_wall_s`` beside it, ``runs``, ``load`` (load averages at start and end) and ``quiet``
(false when the 1-minute load at start was above 0.5: read the ratio with care). ``--tiny``: a
few seconds, to check the bench runs. Not a test: nothing is asserted. SIGTERM drops the scratch
database.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter

import benchkit

BASE = benchkit.ROOT


def seed(hosts: int, per_host: int, tenants: int) -> list[int]:
    """GPUs, tenants and pools; returns the pool ids (tenant pools, then the shared one)."""
    from pools.models import Pool, Tenant
    from tests.support.gpus import make_gpu_fabric

    make_gpu_fabric("bench", hosts=hosts, per_host=per_host)
    share = hosts * per_host // (2 * tenants + 1)
    pools = []
    for t in range(tenants):
        tenant = Tenant.objects.create(name=f"tenant{t}")
        for k in range(2):
            pools.append(Pool.objects.create(
                name=f"t{t}-p{k}", tenant=tenant, quota_gpus=share * 3 // 2, guaranteed_gpus=share,
                priority_weight=1 + (t % 3),
            ).pk)  # fmt: skip
    pools.append(Pool.objects.create(name="shared", quota_gpus=share, guaranteed_gpus=0).pk)
    return pools


def reset() -> None:
    """Every GPU free, no allocation (between runs)."""
    from django.db import connection

    from pools.models import Gpu

    with connection.cursor() as cur:
        # CASCADE: scheduler_job references pools_allocation (PostgreSQL refuses a plain TRUNCATE of
        # a referenced table; the scratch database has no job)
        cur.execute("TRUNCATE pools_allocationitem, pools_allocation CASCADE")
    Gpu.objects.update(state="free")


def check(pool_ids: list[int], peaks: dict[int, int]) -> tuple[int, int]:
    """(double allocations, quota violations) now, and over the peaks the monitor read."""
    from django.db.models import Count

    from pools.models import AllocationItem, Gpu, Pool
    from pools.services.allocation import pool_usage

    active = AllocationItem.objects.filter(active=True, kind="gpu")
    doubles = active.values("gpu_id").annotate(n=Count("id")).filter(n__gt=1).count()
    held = set(active.values_list("gpu_id", flat=True))
    state = set(Gpu.objects.filter(state="allocated").values_list("pk", flat=True))
    doubles += len(held ^ state)
    quotas = dict(Pool.objects.filter(pk__in=pool_ids).values_list("pk", "quota_gpus"))
    violations = sum(1 for p in pool_ids if max(peaks.get(p, 0), pool_usage(p)["gpus"]) > quotas[p])
    return doubles, violations


def run(mode: str, pool_ids: list[int], tenant_of: dict[int, int | None], tenants: list[int], hot: list[int],
        clients: int, requests: int, hold: int) -> dict:  # fmt: skip
    from django.db import connections

    from pools.services.allocation import AllocationError, AllocationRequest, allocate, pool_usage, release

    gate = threading.Lock() if mode == "baseline" else None
    barrier = threading.Barrier(clients + 1)
    lat: list[float] = []
    outcomes: Counter = Counter()
    errors: list[BaseException] = []
    peaks: dict[int, int] = {}
    stop = threading.Event()
    mu = threading.Lock()

    def call(fn, *a, **kw):
        if gate is None:
            return fn(*a, **kw)
        with gate:
            return fn(*a, **kw)

    def client(n: int) -> None:
        rng = random.Random(1000 + n)  # the same stream in both modes
        mine, my_lat, my_out = [], [], Counter()
        try:
            barrier.wait()
            for _ in range(requests):
                pool = rng.choice(pool_ids)
                if rng.random() < 0.1:
                    req = AllocationRequest(count=0, gpu_ids=rng.sample(hot, rng.randint(1, 4)))
                    req.count = len(req.gpu_ids)
                else:
                    req = AllocationRequest(count=rng.randint(1, 8))
                if tenant_of[pool] is None:
                    req.tenant_id = rng.choice(tenants)
                t0 = time.perf_counter()
                try:
                    mine.append(call(allocate, pool, req).pk)
                    my_out["ok"] += 1
                except AllocationError as exc:
                    my_out[exc.code] += 1
                my_lat.append(time.perf_counter() - t0)
                while len(mine) > hold:
                    try:
                        call(release, mine.pop(0))
                        my_out["released"] += 1
                    except AllocationError:
                        my_out["release_refused"] += 1
        except BaseException as exc:  # reported in the result
            errors.append(exc)
        finally:
            with mu:
                lat.extend(my_lat)
                outcomes.update(my_out)
            connections.close_all()

    def monitor() -> None:
        try:
            while not stop.is_set():
                for p in pool_ids:
                    peaks[p] = max(peaks.get(p, 0), pool_usage(p)["gpus"])
                stop.wait(0.02)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    mon = threading.Thread(target=monitor)
    mon.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    stop.set()
    mon.join()
    doubles, violations = check(pool_ids, peaks)
    lat.sort()
    ms = [x * 1000 for x in lat]
    return {
        "mode": mode,
        "wall_s": round(wall, 3),
        "allocations_per_s": round(outcomes["ok"] / wall, 1),
        "requests_per_s": round(len(lat) / wall, 1),
        "p50_ms": round(statistics.median(ms), 2) if ms else None,
        "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2) if ms else None,
        "outcomes": dict(outcomes),
        "double_allocations": doubles,
        "quota_violations": violations,
        "errors": [repr(e) for e in errors[:3]],
    }


def _summary(runs: list[dict]) -> dict:
    def med(key):
        vals = [r[key] for r in runs]
        return statistics.median(vals), [min(vals), max(vals)]

    aps, aps_spread = med("allocations_per_s")
    wall, wall_spread = med("wall_s")
    p50, p50_spread = med("p50_ms")
    p99, p99_spread = med("p99_ms")
    return {
        "allocations_per_s": aps, "allocations_per_s_spread": aps_spread, "wall_s": wall, "wall_s_spread": wall_spread,
        "p50_ms": p50, "p50_ms_spread": p50_spread,
        "p99_ms": p99, "p99_ms_spread": p99_spread,
        "double_allocations": sum(r["double_allocations"] for r in runs),
        "quota_violations": sum(r["quota_violations"] for r in runs),
        "errors": sum(len(r["errors"]) for r in runs),
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=2048)
    ap.add_argument("--per-host", type=int, default=8)
    ap.add_argument("--tenants", type=int, default=8)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=100, help="allocate requests per client and run")
    ap.add_argument("--hold", type=int, default=4, help="allocations a client keeps before releasing")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each mode, alternating")
    ap.add_argument("--pg-url", default=benchkit.DEFAULT_PG, help="PostgreSQL server (WEFT_BENCH_PG)")
    ap.add_argument(
        "--tiny", action="store_true", help="seconds: 32 hosts, 2 tenants, 4 clients, 10 requests, 1 round"
    )
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args()
    if args.tiny:
        args.hosts, args.tenants, args.clients, args.requests, args.rounds = 32, 2, 4, 10, 1

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    kit = benchkit.Bench("allocation")
    os.environ.pop("REDIS_URL", None)  # embedded mode: no broker, realtime messages dropped
    out: dict = {"gpus": args.hosts * args.per_host, "hosts": args.hosts, "clients": args.clients}
    with kit.scratch_database(args.pg_url):
        benchkit.django_setup()
        from pools.models import Gpu, Pool, Tenant

        t0 = time.perf_counter()
        pool_ids = seed(args.hosts, args.per_host, args.tenants)
        say(f"seeded {Gpu.objects.count()} GPUs, {len(pool_ids)} pools in {time.perf_counter() - t0:.1f} s")
        tenant_of = dict(Pool.objects.values_list("pk", "tenant_id"))
        tenants = list(Tenant.objects.values_list("pk", flat=True))
        hot = list(Gpu.objects.order_by("pk").values_list("pk", flat=True)[:256])
        runs = []
        for r in range(args.rounds):
            for mode in ("concurrent", "baseline") if r % 2 == 0 else ("baseline", "concurrent"):
                reset()
                res = run(mode, pool_ids, tenant_of, tenants, hot, args.clients, args.requests, args.hold)
                say(json.dumps(res))
                runs.append(res)
        conc = _summary([r for r in runs if r["mode"] == "concurrent"])
        base = _summary([r for r in runs if r["mode"] == "baseline"])
        out |= conc
        out["baseline"] = base
        # throughput ratio, with each side's wall seconds (the same requests) beside it
        out["concurrent_wall_s"], out["baseline_wall_s"] = conc["wall_s"], base["wall_s"]
        out["ratio"] = (
            round(conc["allocations_per_s"] / base["allocations_per_s"], 2)
            if base["allocations_per_s"]
            else None
        )
        out["requests"] = args.clients * args.requests
        out["runs"] = runs
    kit.finish(out)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
