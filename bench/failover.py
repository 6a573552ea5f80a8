"""Benchmark: take-over time of a singleton role's standby (issue 25 §1; ``core.leases``).

A scratch PostgreSQL database (``--pg-url`` server; created and dropped here). Each round starts
two candidate processes for one role (``python bench/failover.py --candidate ROLE``: a
:class:`core.leases.LeaseKeeper`, as the beat, ``listen_notices`` and ``snmp_traps`` run it), waits
for a leader, then stops the leader and measures the time until the standby holds the role (the
lease row's next fencing number, read every 10 ms):

* **kill**: ``kill -9`` of the leader (a host dying): the standby waits for the lease to lapse,
  at most ``ttl`` after the last renewal, plus its poll (ttl/5);
* **baseline, clean stop**: SIGTERM of the leader, which releases the lease: the standby takes
  over at its next poll.

Runs alternate (``--rounds`` of each); medians with their spread (min-max). The last line of stdout
is a JSON object: ``ttl_s``, ``kill`` and ``clean`` (``median_s``, ``spread_s``, ``runs``),
``bound_s`` (ttl + ttl/5: the most a kill's take-over may take after the last renewal, plus the
time the leader had left of its renewal period), ``kill_over_clean`` (ratio of medians),
``overlaps`` (rounds where both candidates held the role at once by their own account: must be
0), ``load`` and ``quiet``. ``--tiny``: one round each with a 1 s lease. Not a test: nothing is
asserted.

    python bench/failover.py [--ttl 3] [--rounds 5] [--tiny] [--pg-url postgresql://…]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

import benchkit


def candidate(role: str, ttl: float) -> None:
    """Child: campaign for ``role`` until SIGTERM (then release); prints ``leading``/``lost``
    lines with ``time.time()`` so the parent can check no two lead at once."""
    benchkit.django_setup(migrate=False)
    from core.leases import LeaseKeeper

    def say(what):
        print(json.dumps({"event": what, "at": time.time(), "pid": os.getpid()}), flush=True)

    keeper = LeaseKeeper(
        [role], ttl_s=ttl, on_elected=lambda r: say("leading"), on_lost=lambda r: say("lost")
    )
    stopping = []
    signal.signal(signal.SIGTERM, lambda s, f: stopping.append(s))
    keeper.start()
    while not stopping:
        time.sleep(0.05)
    keeper.stop()


def one_round(role: str, ttl: float, how: str) -> tuple[float, list[dict]]:
    """Two candidates; stop the leader ``how`` ("kill"/"clean"); seconds to the take-over, and
    the candidates' leading/lost lines."""
    from core.models import Lease

    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--candidate", role, "--ttl", str(ttl)],
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
            start_new_session=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 60
        row = None
        while row is None or row.expires_at.timestamp() < time.time():
            if time.monotonic() > deadline:
                raise RuntimeError("no leader within 60 s")
            time.sleep(0.01)
            row = Lease.objects.filter(role=role).first()
        leader = int(row.holder.split(":")[1])
        fencing = row.fencing
        stopped = time.monotonic()
        os.kill(leader, signal.SIGKILL if how == "kill" else signal.SIGTERM)
        while not Lease.objects.filter(role=role, fencing=fencing + 1).exists():
            if time.monotonic() - stopped > 10 * ttl + 30:
                raise RuntimeError("no take-over")
            time.sleep(0.01)
        took = time.monotonic() - stopped
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        lines = []
        for p in procs:
            try:
                out, _ = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, _ = p.communicate()
            lines += [json.loads(line) for line in (out or "").splitlines() if line.startswith("{")]
    return took, lines


def overlapped(lines: list[dict]) -> bool:
    """True when two candidates' leading intervals (by their own clocks) overlap."""
    spans: dict[int, list[list[float]]] = {}
    for line in sorted(lines, key=lambda x: x["at"]):
        if line["event"] == "leading":
            spans.setdefault(line["pid"], []).append([line["at"], float("inf")])
        elif spans.get(line["pid"]):
            spans[line["pid"]][-1][1] = line["at"]
    flat = [(a, b, pid) for pid, s in spans.items() for a, b in s]
    # a killed leader prints no "lost": its span ends when the standby starts (it is dead)
    return any(
        a1 < b2 and a2 < b1 and p1 != p2 and b1 != float("inf") and b2 != float("inf")
        for a1, b1, p1 in flat
        for a2, b2, p2 in flat
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidate", help=argparse.SUPPRESS)
    parser.add_argument("--ttl", type=float, default=3.0, help="lease time to live (s)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="one round each, a 1 s lease")
    parser.add_argument("--json", action="store_true", help="the figures as JSON (always the last line)")
    parser.add_argument("--pg-url", default=benchkit.pg_server_from_env() or benchkit.DEFAULT_PG)
    args = parser.parse_args()
    if args.candidate:
        candidate(args.candidate, args.ttl)
        return
    if args.tiny:
        args.rounds, args.ttl = 1, 1.0
    kit = benchkit.Bench("failover")
    with kit.scratch_database(args.pg_url):
        benchkit.django_setup()
        times: dict[str, list[float]] = {"kill": [], "clean": []}
        overlaps = 0
        for i in range(args.rounds):
            for how in ("kill", "clean"):
                took, lines = one_round(f"bench:{how}:{i}", args.ttl, how)
                times[how].append(took)
                overlaps += overlapped(lines)
        kill_med, kill_spread = benchkit.median_spread(times["kill"], 3)
        clean_med, clean_spread = benchkit.median_spread(times["clean"], 3)
        out = {
            "ttl_s": args.ttl,
            "kill": {"median_s": kill_med, "spread_s": kill_spread, "runs": len(times["kill"])},
            "clean": {"median_s": clean_med, "spread_s": clean_spread, "runs": len(times["clean"])},
            "bound_s": round(args.ttl * 1.2, 3),
            "kill_over_clean": round(kill_med / clean_med, 2) if clean_med else None,
            "overlaps": overlaps,
        }
    print(json.dumps(kit.finish(out)))


if __name__ == "__main__":
    main()
