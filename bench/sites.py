"""Benchmark: several fabrics swept in parallel by several workers of one site (issue 25 §2).

A scratch PostgreSQL database (:mod:`benchkit`) and Redis (``--redis-url``, default ``REDIS_URL``;
only this run's queue and lock keys are used and removed). ``--fabrics`` small labs (ibsim +
OpenSM, ``lab.Lab`` on the 2-switch, 4-CA netfile), each a fabric at one collector site whose
queue (``fabric.<site>``, a name new for each run) is served by real ``celery -A weft worker -Q
fabric.<site> -c 1`` processes: one, then two. Each fabric is discovered once first.

A round is the beat's sweep: ``telemetry.tasks.poll_all_task`` (the fan-out: one
``poll_fabric_task`` per fabric on the site's queue), timed until every fabric's new Sweep row is
written (polled every 20 ms). Phases alternate 1, 2, 1, 2 workers (the second worker is stopped
with SIGTERM and started again), ``--rounds`` rounds each; per worker count the median round with
its spread and the throughput (sweeps per second). The last line of stdout is a JSON object:
``fabrics``, ``one``/``two`` (``median_s``, ``spread_s``, ``rounds``, ``sweeps_per_s``, ``by_worker``:
sweeps each worker ran, from ``Sweep.worker``), ``ratio`` (two workers' throughput over one's: 2.0
would be perfect scaling; the machine has ``cpus`` cores, shared with ibsim and OpenSM), ``load``
and ``quiet``. ``--tiny``: 2 fabrics, one round per phase, phases 1, 2. Not a test: nothing is
asserted.

    python bench/sites.py [--fabrics 4] [--rounds 5] [--tiny] [--json] [--pg-url postgresql://…]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import benchkit


class Worker:
    """A ``celery -A weft worker -Q <queue> -n <name>@%h -c 1`` on the scratch database."""

    def __init__(self, queue: str, name: str, env: dict[str, str], log_dir: Path) -> None:
        self.name = name
        self.log = log_dir / f"{name}.log"
        argv = [sys.executable, "-m", "celery", "-A", "weft", "worker", "-l", "warning", "-c", "1"]
        argv += [
            "-Q",
            queue,
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ]
        self._out = self.log.open("ab")
        self.proc = subprocess.Popen(
            argv,
            cwd=benchkit.ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        """SIGTERM (a warm shutdown: the site heartbeat is released), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._out.close()


def wait(condition, timeout: float, what: str, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"sites bench: timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fabrics", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="2 fabrics, one round per phase, phases 1, 2")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--pg-url", default=benchkit.pg_server_from_env() or benchkit.DEFAULT_PG)
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/13")
    args = parser.parse_args()
    if args.tiny:
        args.fabrics, args.rounds = 2, 1
    phases = [1, 2] if args.tiny else [1, 2, 1, 2]
    site = f"bench{uuid.uuid4().hex[:6]}"
    queue = f"fabric.{site}"
    kit = benchkit.Bench("sites")
    os.environ.update(REDIS_URL=args.redis_url, WEFT_PRODUCTION="0", WEFT_CELERY_EAGER="0")
    os.environ.update(WEFT_SITE_CHECK="1", WEFT_LEASE_TTL_S="2", WEFT_TOOL_TIMEOUT_S="60")
    log_dir = Path(tempfile.mkdtemp(prefix="weft-bench-sites-"))

    def say(msg: str) -> None:
        if not args.json:
            print(msg, file=sys.stderr, flush=True)

    with kit.scratch_database(args.pg_url) as url:
        benchkit.django_setup()
        import redis

        from core.sites import site_states
        from fabric.models import Fabric
        from fabric.services.discovery import discover
        from lab import Lab
        from lab.pytest_plugin import small_netfile
        from telemetry.models import Sweep
        from telemetry.tasks import poll_all_task

        client = redis.Redis.from_url(args.redis_url)
        kit.on_exit(lambda: [client.delete(k) for k in client.keys(f"{queue}*")])
        fabrics = []
        for i in range(args.fabrics):
            lab = kit.stops(Lab(small_netfile()).start())
            fabric = Fabric.objects.create(name=f"{site}-{i}", site=site, tool_env=lab.tool_env)
            discover(fabric, timeout=60)
            fabrics.append(fabric)
        say(f"{len(fabrics)} lab fabrics discovered at site {site}")
        env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        env.update(DATABASE_URL=url, PYTHONUNBUFFERED="1")
        workers: dict[str, Worker] = {}

        def run_with(n: int) -> None:
            for name in [f"w{i}" for i in range(n)]:
                if name not in workers:
                    workers[name] = kit.stops(Worker(queue, name, env, log_dir))
            for name in [w for w in workers if int(w[1:]) >= n]:
                workers.pop(name).stop()
            wait(lambda: len(site_states([site])[site].workers) == n, 90, f"{n} live worker(s)")

        times: dict[int, list[float]] = {1: [], 2: []}
        for n in phases:
            run_with(n)
            for _ in range(args.rounds + 1):  # the first round of a phase warms the new worker up
                before = Sweep.objects.filter(fabric__site=site).exclude(duration_s=None).count()
                t0 = time.monotonic()
                out = poll_all_task()
                assert all(r.get("queued") for r in out), out
                wait(
                    lambda b=before: Sweep.objects.filter(fabric__site=site).exclude(duration_s=None).count()
                    >= b + len(fabrics),
                    120,
                    "the round's sweeps",
                )
                times[n].append(time.monotonic() - t0)
            times[n].pop(-args.rounds - 1)  # drop the warm-up
            say(f"{n} worker(s): rounds {[round(t, 3) for t in times[n][-args.rounds :]]}")
        by_worker: dict[str, int] = {}
        for w in Sweep.objects.filter(fabric__site=site).values_list("worker", flat=True):
            name = w.split("@", 1)[0]
            by_worker[name] = by_worker.get(name, 0) + 1
        for w in list(workers.values()):
            w.stop()
        workers.clear()
        result: dict = {"fabrics": len(fabrics), "site_queue": queue, "cpus": os.cpu_count()}
        for n, key in ((1, "one"), (2, "two")):
            median, spread = benchkit.median_spread(times[n])
            result[key] = {
                "workers": n,
                "median_s": median,
                "spread_s": spread,
                "rounds": len(times[n]),
                "sweeps_per_s": round(len(fabrics) / median, 2) if median else None,
            }
        result["by_worker"] = by_worker
        one, two = result["one"]["sweeps_per_s"], result["two"]["sweeps_per_s"]
        result["ratio"] = round(two / one, 3) if one and two else None
        Fabric.objects.filter(site=site).delete()
    print(json.dumps(kit.finish(result)))


if __name__ == "__main__":
    main()
