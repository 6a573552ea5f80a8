"""Benchmark: one SNMP poll of 100 devices served by snmpsim, against net-snmp's C tools reading the
same columns with the same concurrency, and against the same reads one at a time.

``--devices`` (default 100) copies of one real recording (``--recording``, default the Arista
DCS-7150S-52-CL of ``$WEFT_REALDATA/snmp``: 59 interfaces with 64-bit counters, PFC counters,
95 sensors, LLDP), trimmed at start to the tables the poller reads (system group, ifTable,
ifXTable, IEEE8021-PFC-MIB, ENTITY-MIB, ENTITY-SENSOR-MIB, LLDP-MIB: a temp folder, nothing
written into the project), are served by ``--agents`` snmpsim processes (default 2, one per
core) on loopback, each device its own community. A throw-away SQLite database (``WEFT_DATA_DIR``
in a temp folder) holds the devices.

After one warm-up poll (identification, entity tree; not timed), Weft's walk of the 13 interface
columns and net-snmp's of the same columns are compared value by value (every device with
``--tiny``, else the first three: ``values_checked``; the bench stops with the differences when
one differs). Then each round times, each side first in turn:

* ``poll``: ``devices.services.poll.poll_devices`` — every device read concurrently
  (``WEFT_SNMP_CONCURRENCY``), then stored and the alarm rules applied (what the beat task does);
  its read phase alone is ``collect``;
* ``netsnmp``: net-snmp's C tools (Debian package ``snmp``) reading what a poll reads of every
  device: ``snmpget`` of the two scalars and one ``snmpbulkwalk -Cr64`` of each of the 13
  interface columns (``INTERFACE_COLUMNS``), no MIB loaded, ``--concurrency`` devices at once
  (that many processes at a time), so the agents answer the same requests;
* ``baseline``: the same reads (``collect``) one device at a time (concurrency 1), as a poller
  that walks its devices in turn.

The last line of stdout is a JSON object: ``devices``, ``interfaces`` (read per poll),
``sweep_s`` (median poll, store included), ``collect_s`` (median concurrent reads),
``baseline_s`` (median one-at-a-time reads), ``speedup`` (baseline / collect), ``netsnmp_s``
(median net-snmp reads), ``ratio_netsnmp`` (collect / netsnmp; target ``ratio_netsnmp_target``
1.5), ``cpu_s_per_1000_interfaces`` (the poller's CPU seconds of the concurrent reads per 1,000
interfaces; ``netsnmp_cpu_s_per_1000_interfaces`` the same of the net-snmp processes), ``requests``
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
import asyncio
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


async def _walk(target) -> dict[str, dict[str, object]]:
    """Weft's walk of the 13 interface columns of one device (``devices.collectors.snmp``)."""
    from devices.collectors.snmp import Session
    from devices.services.poll import INTERFACE_COLUMNS

    session = Session(target)
    try:
        return await session.walk(list(INTERFACE_COLUMNS))
    finally:
        session.close()


def trimmed(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="surrogateescape") as fh:
        return "".join(ln for ln in fh if ln.startswith(KEEP))


#: net-snmp's C tools (Debian package ``snmp``): the baseline of the ratio
NETSNMP_TOOLS = ("snmpget", "snmpbulkwalk")
#: every option of every net-snmp run: no MIB files loaded (``-m ''``: numeric OIDs only, as
#: Weft's poller), numeric OIDs out (``-On``), value only after the OID (``-Oq``), enumerations
#: and time ticks as numbers (``-Oe -Ot``), strings in hex where not printable is irrelevant here
NETSNMP_OPTS = ("-v2c", "-m", "", "-On", "-Oq", "-Oe", "-Ot", "-Cr64")


#: how net-snmp prints an exception value (endOfMibView at the end of the agent's MIB, noSuch*):
#: not a value
NETSNMP_EXCEPTIONS = ("No more variables left", "No Such Object", "No Such Instance")


def netsnmp_missing() -> list[str]:
    """The net-snmp tools absent from ``PATH`` (install the Debian package ``snmp``)."""
    import shutil

    return [t for t in NETSNMP_TOOLS if shutil.which(t) is None]


def netsnmp_commands(host: str, port: int, community: str, timeout_s: float, retries: int) -> list[list[str]]:
    """The net-snmp runs that read one device as Weft's poll between inventories does: one
    ``snmpget`` of the poll's two scalars (``devices.mibs.POLL_SCALARS``) and one ``snmpbulkwalk``
    of each of the 13 interface columns (``devices.services.poll.INTERFACE_COLUMNS``), 64
    repetitions a request (``-Cr64``: the 64 varbinds a response carries in Weft's walk)."""
    from devices import mibs
    from devices.services.poll import INTERFACE_COLUMNS

    common = ["-c", community, "-t", f"{timeout_s:g}", "-r", str(retries)]
    agent = f"udp:{host}:{port}"
    get = ["snmpget", *[o for o in NETSNMP_OPTS if o != "-Cr64"], *common, agent, *mibs.POLL_SCALARS]
    walks = [["snmpbulkwalk", *NETSNMP_OPTS, *common, agent, col] for col in INTERFACE_COLUMNS]
    return [get, *walks]


def parse_netsnmp(text: str) -> dict[str, str]:
    """``{numeric OID: value text}`` of net-snmp's ``-On -Oq`` output (``.1.3.6... value``; the
    exception values of :data:`NETSNMP_EXCEPTIONS` left out)."""
    out = {}
    for line in text.splitlines():
        oid, _, value = line.partition(" ")
        value = value.strip().strip('"')
        if oid.startswith(".") and not value.startswith(NETSNMP_EXCEPTIONS):
            out[oid[1:]] = value
    return out


def netsnmp_poll(jobs: list[list[list[str]]], concurrency: int) -> tuple[float, float, list[str]]:
    """Run each device's commands (:func:`netsnmp_commands`, one after the other) with
    ``concurrency`` devices at once (that many net-snmp processes running at a time, as Weft's
    poller reads that many devices at once). Returns ``(wall s, CPU s of the net-snmp processes,
    [each device's output])``.

    Raises:
        RuntimeError: a tool failed (its stderr in the message)."""
    import resource
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    def one(cmds: list[list[str]]) -> str:
        text = []
        for argv in cmds:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError(
                    f"{' '.join(argv[:1] + argv[-2:])}: exit {r.returncode}: {r.stderr[-300:]}"
                )
            text.append(r.stdout)
        return "".join(text)

    def children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    c0, t0 = children_cpu(), time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        outputs = list(pool.map(one, jobs))
    return time.monotonic() - t0, children_cpu() - c0, outputs


def same_values(weft: dict[str, dict[str, object]], netsnmp: dict[str, str]) -> list[str]:
    """Where Weft's walk (``Session.walk``: ``{column: {index: value}}``) and net-snmp's
    (:func:`parse_netsnmp`) of the same columns differ: ``["<oid>: weft <v> net-snmp <v>"]``
    (empty when every value is the same, and both read the same OIDs)."""
    diffs = []
    seen = set()
    for col, rows in weft.items():
        for index, value in rows.items():
            oid = f"{col}.{index}"
            seen.add(oid)
            theirs = netsnmp.get(oid)
            mine = value.decode("latin-1") if isinstance(value, bytes) else str(value)
            if theirs is None or theirs != mine:
                diffs.append(f"{oid}: weft {mine!r} net-snmp {theirs!r}")
    prefixes = tuple(f"{c}." for c in weft)
    diffs += [f"{oid}: net-snmp only" for oid in netsnmp if oid.startswith(prefixes) and oid not in seen]
    return diffs


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
    if netsnmp_missing():
        print(
            json.dumps(
                {"error": f"{', '.join(netsnmp_missing())} not found: install Debian's snmp (bin/setup)"}
            )
        )
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
        devices = list(Device.objects.select_related("fabric").order_by("pk"))
        jobs = [netsnmp_commands(d.address, d.port, d.target().community, args.timeout, 1) for d in devices]
        # both read the same values: Weft's walk of the 13 columns against net-snmp's, per device
        checked = devices if args.tiny else devices[:3]
        _, _, texts = netsnmp_poll(jobs[: len(checked)], args.concurrency)
        diffs = []
        for d, text in zip(checked, texts, strict=True):
            theirs = parse_netsnmp(text)
            mine = asyncio.run(_walk(d.target()))
            diffs += [f"{d.name} {x}" for x in same_values(mine, theirs)]
            values = sum(len(v) for v in mine.values())
        say(f"values: {len(checked)} devices x {values} values read the same by both: {not diffs}")
        if diffs:
            return {"error": "Weft and net-snmp read different values", "differences": diffs[:10]}
        polls, collects, bases, nets, requests = [], [], [], [], []
        client_cpu, agent_cpu, net_cpu = [], [], []
        agent_pids = [a.proc.pid for a in agents]
        sides = ("poll", "netsnmp", "baseline")
        for rnd in range(args.rounds):
            order = sides[rnd % 3 :] + sides[: rnd % 3]  # each side first in turn
            for what in order:
                devices = list(Device.objects.select_related("fabric").order_by("pk"))
                if what == "poll":
                    t = time.monotonic()
                    out = poll_devices(devices, inventory=False, concurrency=args.concurrency)
                    polls.append(time.monotonic() - t)
                    requests.append(sum(r["requests"] for r in out))
                    # the read phase alone, on its own, for the ratios against the baselines
                    t, c0, a0 = time.monotonic(), time.process_time(), cpu_s(agent_pids)
                    got = collect(devices, inventory=False, concurrency=args.concurrency)
                    collects.append(time.monotonic() - t)
                    client_cpu.append(time.process_time() - c0)
                    agent_cpu.append(cpu_s(agent_pids) - a0)
                    assert all(r.kind == "ok" for r in got.values()), "a device failed"
                elif what == "netsnmp":
                    wall, cpu, _ = netsnmp_poll(jobs, args.concurrency)
                    nets.append(wall)
                    net_cpu.append(cpu)
                else:
                    t = time.monotonic()
                    got = collect(devices, inventory=False, concurrency=1)
                    bases.append(time.monotonic() - t)
                    assert all(r.kind == "ok" for r in got.values()), "a device failed"
            say(
                f"round {rnd + 1}: poll {polls[-1]:.2f} s (reads {collects[-1]:.2f} s), net-snmp "
                f"{nets[-1]:.2f} s, one at a time {bases[-1]:.2f} s"
            )
    finally:
        for a in agents:
            a.stop()

    def rng(xs):
        return [round(min(xs), 3), round(max(xs), 3)]

    collect_s = statistics.median(collects)
    base_s = statistics.median(bases)
    net_s = statistics.median(nets)
    cpu = statistics.median(client_cpu)
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
        "netsnmp_s": round(net_s, 3),
        "netsnmp_s_range": rng(nets),
        "ratio_netsnmp": round(collect_s / net_s, 2) if net_s else None,
        "ratio_netsnmp_target": 1.5,
        "netsnmp_cpu_s": round(statistics.median(net_cpu), 3),
        "cpu_s_per_1000_interfaces": round(cpu / interfaces * 1000, 3) if interfaces else None,
        "netsnmp_cpu_s_per_1000_interfaces": round(statistics.median(net_cpu) / interfaces * 1000, 3)
        if interfaces
        else None,
        "values_checked": len(checked),
        "requests": int(statistics.median(requests)),
        "client_cpu_s": round(cpu, 3),
        "agents_cpu_s": round(statistics.median(agent_cpu), 3),
        "agents": args.agents,
        "concurrency": args.concurrency,
        "rounds": args.rounds,
        "sensors_every_s": settings.WEFT_SNMP_SENSORS_S,
        "recording": args.recording,
        "notes": "snmpsim (pure Python, single-threaded per agent) shares the 2 cores with the poller "
        "and net-snmp: the agents' answering time is part of every figure. ratio_netsnmp = Weft's "
        "concurrent reads (collect_s) / net-snmp's C tools reading the same 13 columns of every "
        "device with the same concurrency (netsnmp_s); target <= 1.5",
    }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
