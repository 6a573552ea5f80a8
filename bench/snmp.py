"""Benchmark: one SNMP poll of 100 devices served by snmpsim, against the same reads one at a time.

``--devices`` (default 100) copies of one real recording (``--recording``, default the Arista
DCS-7150S-52-CL of ``$WEFT_REALDATA/snmp``: 59 interfaces with 64-bit counters, PFC counters,
95 sensors, LLDP), trimmed at start to the tables the poller reads (system group, ifTable,
ifXTable, IEEE8021-PFC-MIB, ENTITY-MIB, ENTITY-SENSOR-MIB, LLDP-MIB: a temp folder, nothing
written into the project), are served by ``--agents`` snmpsim processes (default 2, one per
core) on loopback, each device its own community. A throw-away SQLite database (``WEFT_DATA_DIR``
in a temp folder) holds the devices.

After one warm-up poll (identification, entity tree; not timed), each round times, alternating
which goes first:

* ``poll``: ``devices.services.poll.poll_devices`` — every device read concurrently
  (``WEFT_SNMP_CONCURRENCY``), then stored and the alarm rules applied (what the beat task does);
  its read phase alone is ``collect``;
* ``baseline``: the same reads (``collect``) one device at a time (concurrency 1), as a poller
  that walks its devices in turn.

The last line of stdout is a JSON object: ``devices``, ``interfaces`` (read per poll),
``sweep_s`` (median poll, store included), ``collect_s`` (median concurrent reads),
``baseline_s`` (median one-at-a-time reads), ``speedup`` (baseline / collect), ``requests``
(SNMP requests per poll), ``client_cpu_s`` / ``agents_cpu_s`` (CPU seconds the poller and the
snmpsim agents spent during the concurrent reads: where the time goes), ``*_range`` [min, max], ``rounds``, ``load`` (load averages at start and
end), ``quiet`` (false when the 1-minute load at start was above 0.5), ``sensors_every_s`` (``WEFT_SNMP_SENSORS_S``: the timed polls come right after the
warm-up, so they read the sensors only when it is 0) and ``notes``. Not a test: nothing is
asserted beyond every device answering. ``--tiny``: 4 devices, one agent, one round (seconds: the
bench runs). SIGTERM stops the snmpsim agents and removes the scratch database. Every timed poll reads every interface's states and
counters; the LLDP remote table only where lldpStatsRemTablesLastChangeTime moved (it does not
in a recording).

    python bench/snmp.py [--devices 100] [--rounds 3] [--agents 2] [--concurrency 16] [--tiny] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

import benchkit

#: what the poller reads (``devices.mibs``): the recording is cut down to these subtrees
KEEP = (
    "1.3.6.1.2.1.1.",
    "1.3.6.1.2.1.2.2.1.",
    "1.3.6.1.2.1.31.1.1.1.",
    "1.3.111.2.802.1.1.21.",
    "1.3.6.1.2.1.47.1.1.1.1.2.",
    "1.3.6.1.2.1.47.1.1.1.1.4.",
    "1.3.6.1.2.1.47.1.1.1.1.5.",
    "1.3.6.1.2.1.47.1.1.1.1.7.",
    "1.3.6.1.2.1.47.1.1.1.1.11.",
    "1.3.6.1.2.1.47.1.1.1.1.12.",
    "1.3.6.1.2.1.47.1.1.1.1.13.",
    "1.3.6.1.2.1.99.1.1.1.",
    "1.0.8802.1.1.2.1.2.1.0|",
    "1.0.8802.1.1.2.1.3.7.1.",
    "1.0.8802.1.1.2.1.4.1.1.",
    "1.3.6.1.6.3.10.2.1.1.",
)


def cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of processes ``pids`` and their children so far (``/proc``)."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def trimmed(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as fh:
        return "".join(ln for ln in fh if ln.startswith(KEEP))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--agents", type=int, default=2, help="snmpsim processes (devices spread over them)")
    ap.add_argument(
        "--concurrency", type=int, default=16, help="devices read at once (WEFT_SNMP_CONCURRENCY)"
    )
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout of every device, s")
    ap.add_argument("--recording", default="snmpsim-data_arista-eos-4.20.5f_dcs-7150s-52-cl.snmprec.gz")
    ap.add_argument("--tiny", action="store_true", help="seconds: 4 devices, 1 agent, 1 round")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args()
    if args.tiny:
        args.devices, args.agents, args.rounds = 4, 1, 1
    realdata = benchkit.realdata()
    source = realdata / "snmp" / args.recording
    if not source.exists():
        print(json.dumps({"error": f"{source} is absent (set WEFT_REALDATA)"}))
        return 1

    def say(*a):
        if not args.json:
            print(*a, file=sys.stderr, flush=True)

    kit = benchkit.Bench("snmp")
    with kit.scratch_database():  # SQLite in a temporary WEFT_DATA_DIR (removed at the end)
        os.environ.setdefault("EMAIL_URL", "file://" + os.environ["WEFT_DATA_DIR"] + "/mail")
        benchkit.django_setup()
        out = run(args, kit, source, say)
    if "error" in out:
        print(json.dumps(out))
        return 1
    print(json.dumps(kit.finish(out)))
    return 0


def run(args, kit: benchkit.Bench, source: Path, say) -> dict:
    """Agents up, devices made, the warm-up poll, then the alternating rounds (module docstring).
    The agents are stopped when the bench ends, a SIGTERM included."""
    from django.conf import settings

    from devices.models import Device
    from devices.services.poll import collect, poll_devices
    from fabric.models import Fabric
    from lab.snmpsim import SnmpSim

    text = trimmed(source)
    names = [f"dev{i:03d}" for i in range(args.devices)]
    agents = [
        kit.stops(SnmpSim({n: text for n in names[k :: args.agents]})) for k in range(args.agents)
    ]  # each agent serves its share of the devices, each device its own community; stopped on exit
    t0 = time.monotonic()
    for a in agents:
        a.start(timeout=600)
    say(f"{args.agents} snmpsim agents up in {time.monotonic() - t0:.1f} s (as {agents[0].user})")
    try:
        fabric = Fabric.objects.create(name="bench-eth")
        devices = []
        for k, a in enumerate(agents):
            for n in names[k :: args.agents]:
                d = Device(
                    fabric=fabric, name=n, address=a.host, port=a.port, timeout_s=args.timeout, retries=1
                )
                d.set_secret("community", n)
                d.save()
                devices.append(d)
        t = time.monotonic()
        warm = poll_devices(devices, inventory=True, concurrency=args.concurrency)
        bad = [r for r in warm if r["status"] != "ok"]
        say(f"warm-up poll (identification) {time.monotonic() - t:.1f} s, {len(bad)} failed")
        if bad:
            return {"error": "devices failed the warm-up poll", "failed": bad[:5]}
        interfaces = sum(r["interfaces"] for r in warm)
        polls, collects, bases, requests = [], [], [], []
        client_cpu, agent_cpu = [], []
        agent_pids = [a.proc.pid for a in agents]
        for rnd in range(args.rounds):
            order = ("poll", "baseline") if rnd % 2 == 0 else ("baseline", "poll")
            for what in order:
                devices = list(Device.objects.select_related("fabric").order_by("pk"))
                if what == "poll":
                    t = time.monotonic()
                    out = poll_devices(devices, inventory=False, concurrency=args.concurrency)
                    polls.append(time.monotonic() - t)
                    requests.append(sum(r["requests"] for r in out))
                    # the read phase alone, on its own, for the ratio against the baseline
                    t, c0, a0 = time.monotonic(), time.process_time(), cpu_s(agent_pids)
                    got = collect(devices, inventory=False, concurrency=args.concurrency)
                    collects.append(time.monotonic() - t)
                    client_cpu.append(time.process_time() - c0)
                    agent_cpu.append(cpu_s(agent_pids) - a0)
                    assert all(r.kind == "ok" for r in got.values()), "a device failed"
                else:
                    t = time.monotonic()
                    got = collect(devices, inventory=False, concurrency=1)
                    bases.append(time.monotonic() - t)
                    assert all(r.kind == "ok" for r in got.values()), "a device failed"
            say(
                f"round {rnd + 1}: poll {polls[-1]:.2f} s (reads {collects[-1]:.2f} s), one at a time {bases[-1]:.2f} s"
            )
    finally:
        for a in agents:
            a.stop()

    def rng(xs):
        return [round(min(xs), 3), round(max(xs), 3)]

    collect_s = statistics.median(collects)
    base_s = statistics.median(bases)
    out = {
        "devices": args.devices,
        "interfaces": interfaces,
        "sweep_s": round(statistics.median(polls), 3),
        "sweep_s_range": rng(polls),
        "collect_s": round(collect_s, 3),
        "collect_s_range": rng(collects),
        "baseline_s": round(base_s, 3),
        "baseline_s_range": rng(bases),
        "speedup": round(base_s / collect_s, 2) if collect_s else None,
        "requests": int(statistics.median(requests)),
        "client_cpu_s": round(statistics.median(client_cpu), 3),
        "agents_cpu_s": round(statistics.median(agent_cpu), 3),
        "agents": args.agents,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "sensors_every_s": settings.WEFT_SNMP_SENSORS_S,
        "recording": args.recording,
        "notes": "snmpsim (pure Python, single-threaded per agent) shares the 2 cores with the poller: "
        "the agents' answering time is part of every figure, and both sides decode BER with pyasn1 "
        "(the client's largest cost); target sweep_s <= 5 s",
    }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
