"""Benchmark: ``/metrics`` of a Selene-size fabric with every port polled (issue 23 §1).

The Selene compute fabric (666 switches, 4,341 CAs, 25,704 ports: ``selene_compute.ibnetdiscover``
from ``$WEFT_REALDATA``) is imported into a fabric named ``selene`` (``fabric.services.ingest``),
then one sweep's counters are **ingested directly** (a ``Sweep`` and one ``PortCounters`` row per
port, bulk-created; a full lab sweep of Selene takes minutes on two shared cores and the counters'
values, not how they were read, are what ``/metrics`` costs): seeded random traffic counters
(64-bit data words up to 2^46, packets, PortXmitWait; every derived rate set, as a sweep with a
previous sample stores them) and error counters that are zero except on a
few ports (``--error-ports``, default 2 %, the share of ports with any error; each error counter on
its own share of those), no stale port; then ``ANALYZE`` on PostgreSQL (as autovacuum would). ``--tiny`` uses a generated 2-level fat tree of 16 leaves ×
8 hosts instead (seconds, for CI) and SQLite when no ``DATABASE_URL`` is set.

Measured through Django's test client on the real view (``telemetry.metrics.metrics_view``: access
check, queries, rendering, gzip), ``--runs`` times each, medians:

* ``server_s`` / ``server_gzip_s`` (medians; ``server_spread_s`` / ``server_gzip_spread_s`` their
  [min, max]): whole ``/metrics`` answer without / with ``Accept-Encoding: gzip``
  (the ports' labels cached, as after the first scrape of a topology), ``server_cpu_s`` the Weft
  process's CPU of it (without PostgreSQL's; on a loaded machine wall ≫ CPU), ``server_cold_s`` the
  first scrape, which builds that cache;
* ``bytes`` / ``gzip_bytes``: the body sizes; ``samples``; ``bytes_per_port``;
* ``per_fabric_job``: the same with ``collect[]=traffic`` and ``collect[]=errors`` (what one of
  several scrape jobs of a split fabric gets);
* baseline (same run, same rows): ``old_*`` — the exposition Weft served before issue 23 (the
  ``telemetry/metrics.py`` of commit d179e6d, run from git) once, and ``ratio_*`` new ÷ old;
* ``treydock_bytes_per_port``: the same ports in the format of treydock/infiniband_exporter
  (counted from its documented metric set, collectors/switch.go and hca.go: 22 ``_total`` port
  counters labelled ``guid``, ``port``; ``*_rate_bytes_per_second`` and ``*_raw_rate_bytes_per_second``
  per linked port; ``*_uplink_info`` per linked port with the remote end; ``*_info`` per node),
  rendered here from the same rows (counters Weft does not read, multicast/unicast/QP1/relay, as 0),
  and ``ratio_bytes_per_port_vs_treydock``.

``load`` (start, end, and the peak during the run) and ``quiet`` as every bench
(``benchkit.LoadWatch``). Targets (issue 23): ``bytes`` ≤ 20 MB, ``gzip_bytes`` ≤
3 MB, ``server_s`` ≤ 1.5 s; ``targets_met`` says which hold. Not a test: nothing is asserted.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/weft_bench python bench/metrics.py [--runs 3] [--json]
    python bench/metrics.py --tiny
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")

from tests.support.migrated import seed_sqlite  # noqa: E402

OLD_COMMIT = "d179e6d"  # telemetry/metrics.py before issue 23 (the baseline)
TARGETS = {"bytes": 20e6, "gzip_bytes": 3e6, "server_s": 1.5}


def _django(tiny: bool) -> None:
    if tiny and not os.environ.get("DATABASE_URL"):
        os.environ["WEFT_DATA_DIR"] = data_dir = tempfile.mkdtemp(prefix="weft-bench-metrics-")
        seed_sqlite(Path(data_dir) / "weft.sqlite3")  # migrated once per set of migrations
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _topology(tiny: bool) -> str:
    if tiny:
        from lab.netgen import fat_tree_2level

        return fat_tree_2level(16, 4, 8)
    realdata = Path(os.environ.get("WEFT_REALDATA", "/work/shared/realdata"))
    path = realdata / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"
    return gzip.decompress(path.read_bytes()).decode()


def ingest(name: str, text: str, error_ports: float, seed: int) -> tuple[object, int]:
    """Import the topology (kept when the fabric already has it) and store one sweep's counters."""
    from datetime import UTC, datetime, timedelta

    from django.db import connection, transaction

    from fabric.models import Fabric, Port
    from fabric.services.ingest import import_topology_text
    from telemetry.models import PortCounters, Sweep
    from telemetry.semantics import DERIVED_FIELDS, ERROR_COUNTERS

    fabric = Fabric.objects.filter(name=name).first()
    if fabric is None or not Port.objects.filter(node__fabric=fabric).exists():
        import_topology_text(name, text, filename=f"{name}.ibnetdiscover")
        fabric = Fabric.objects.get(name=name)
    rng = random.Random(seed)
    now = datetime.now(UTC)
    port_ids = list(Port.objects.filter(node__fabric=fabric).order_by("id").values_list("id", flat=True))
    with transaction.atomic():
        PortCounters.objects.filter(port__node__fabric=fabric).delete()
        Sweep.objects.filter(fabric=fabric).delete()
        sweep = Sweep.objects.create(
            fabric=fabric, started=now - timedelta(seconds=2), duration_s=1.8, interval_s=30.0,
            ports=len(port_ids), stale=0, status="ok",
        )  # fmt: skip
        rows = []
        for pid in port_ids:
            words = rng.randrange(1 << 30, 1 << 46)
            errs = {e: 0 for e in ERROR_COUNTERS}
            if rng.random() < error_ports:
                for e in rng.sample(ERROR_COUNTERS, rng.randint(1, 3)):
                    errs[e] = rng.randint(1, 5000)
            rows.append(
                PortCounters(
                    port_id=pid,
                    sweep=sweep,
                    sampled_at=now,
                    extended=True,
                    xmit_data=words,
                    rcv_data=words + rng.randrange(1 << 20),
                    xmit_pkts=words // 64,
                    rcv_pkts=words // 63,
                    xmit_wait=rng.randrange(1 << 32),
                    **errs,
                    **{f: rng.random() for f in DERIVED_FIELDS},
                )  # fmt: skip
            )
        PortCounters.objects.bulk_create(rows, batch_size=2000)
    if connection.vendor == "postgresql":  # fresh planner statistics, as autovacuum keeps them
        with connection.cursor() as cur:
            cur.execute("ANALYZE")
    return fabric, len(port_ids)


def _get(client, path: str, gz: bool, cpu: list[float] | None = None) -> tuple[bytes, float]:
    headers = {"HTTP_ACCEPT_ENCODING": "gzip"} if gz else {}
    c0, t0 = time.process_time(), time.perf_counter()
    resp = client.get(path, secure=True, **headers)
    took = time.perf_counter() - t0
    if cpu is not None:
        cpu.append(time.process_time() - c0)
    if resp.status_code != 200:
        raise SystemExit(f"GET {path}: {resp.status_code} {resp.content[:200]!r}")
    return resp.content, took


def measure(client, path: str, runs: int) -> dict:
    cpu: list[float] = []
    plain, t_plain = zip(*(_get(client, path, False, cpu) for _ in range(runs)), strict=True)
    packed, t_gz = zip(*(_get(client, path, True) for _ in range(runs)), strict=True)
    body = plain[-1]
    assert gzip.decompress(packed[-1]) == body or b"weft_sweep_age_seconds" in body
    return {
        "bytes": len(body),
        "gzip_bytes": len(packed[-1]),
        "samples": sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#")),
        "server_s": round(statistics.median(t_plain), 3),
        "server_gzip_s": round(statistics.median(t_gz), 3),
        "server_cpu_s": round(statistics.median(cpu), 3),
        "server_spread_s": [round(min(t_plain), 3), round(max(t_plain), 3)],
        "server_gzip_spread_s": [round(min(t_gz), 3), round(max(t_gz), 3)],
    }


def old_exposition(fabric_id: int) -> tuple[bytes, float]:
    """The pre-issue-23 exposition of the same rows (its module from git), and its time."""
    src = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:telemetry/metrics.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader("telemetry._metrics_before_issue23", loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "telemetry"
    exec(compile(src, "telemetry/metrics.py@" + OLD_COMMIT, "exec"), mod.__dict__)
    from prometheus_client import CollectorRegistry, generate_latest

    t0 = time.perf_counter()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(mod.WeftCollector(fabric_id))
    body = generate_latest(registry)
    return body, time.perf_counter() - t0


def treydock_bytes(fabric_id: int) -> int:
    """Bytes of the same ports in treydock/infiniband_exporter's format (see the module docstring)."""
    from fabric.models import Link, Node, Port
    from telemetry.models import PortCounters

    counters = [  # (its metric suffix, Weft field or None: not read by Weft, 0)
        ("excessive_buffer_overrun_errors", "excessive_buffer_overrun_errors"),
        ("link_downed", "link_downed"), ("link_error_recovery", "link_error_recovery"),
        ("local_link_integrity_errors", "local_link_integrity_errors"),
        ("multicast_receive_packets", None), ("multicast_transmit_packets", None), ("qp1_dropped", None),
        ("receive_constraint_errors", "rcv_constraint_errors"), ("receive_data_bytes", "rcv_data"),
        ("receive_errors", "rcv_errors"), ("receive_packets", "rcv_pkts"),
        ("receive_remote_physical_errors", "rcv_remote_phys_errors"), ("receive_switch_relay_errors", None),
        ("symbol_error", "symbol_errors"), ("transmit_constraint_errors", "xmit_constraint_errors"),
        ("transmit_data_bytes", "xmit_data"), ("transmit_discards", "xmit_discards"),
        ("transmit_packets", "xmit_pkts"), ("transmit_wait", "xmit_wait"),
        ("unicast_receive_packets", None), ("unicast_transmit_packets", None), ("vl15_dropped", "vl15_dropped"),
    ]  # fmt: skip
    fields = sorted({f for _, f in counters if f})
    ports = {
        r[0]: r[1:]
        for r in Port.objects.filter(node__fabric_id=fabric_id).values_list(
            "id", "node__node_guid", "port_num", "node__name", "node__node_type", "node__lid", "rate_gbps"
        )
    }
    peer = {}
    for a, b in Link.objects.filter(fabric_id=fabric_id).values_list("port_a_id", "port_b_id"):
        peer[a], peer[b] = b, a
    total = 0
    rows = PortCounters.objects.filter(port__node__fabric_id=fabric_id).values_list("port_id", *fields)
    for r in rows:
        guid, num, _name, kind, _lid, _rate = ports[r[0]]
        prefix = "infiniband_switch_port_" if kind == "switch" else "infiniband_hca_port_"
        values = dict(zip(fields, r[1:], strict=True))
        ident = f'{{guid="{guid}",port="{num}"}} '
        for suffix, field in counters:
            v = values[field] if field else 0
            if field in ("xmit_data", "rcv_data"):
                v *= 4
            total += len(f"{prefix}{suffix}_total{ident}{v}\n")
    for pid, (guid, num, name, kind, _lid, rate) in ports.items():
        if pid not in peer:
            continue
        rg, rn, rname, rkind, rlid, _ = ports[peer[pid]]
        prefix = "infiniband_switch_" if kind == "switch" else "infiniband_hca_"
        who = "switch" if kind == "switch" else "hca"
        v = (rate or 0) * 1e9 / 8
        total += len(f'{prefix}port_rate_bytes_per_second{{guid="{guid}",port="{num}"}} {v:g}\n')
        total += len(
            f'{prefix}port_raw_rate_bytes_per_second{{guid="{guid}",port="{num}"}} {v * 66 / 64:g}\n'
        )
        total += len(
            f'{prefix}uplink_info{{guid="{guid}",port="{num}",{who}="{name}",uplink="{rname}",uplink_guid="{rg}",'
            f'uplink_lid="{rlid or ""}",uplink_port="{rn}",uplink_type="{"SW" if rkind == "switch" else "CA"}"}} 1\n'
        )
    for guid, name, kind, lid in Node.objects.filter(fabric_id=fabric_id).values_list(
        "node_guid", "name", "node_type", "lid"
    ):
        who = "switch" if kind == "switch" else "hca"
        total += len(f'infiniband_{who}_info{{guid="{guid}",lid="{lid or ""}",{who}="{name}"}} 1\n')
    return total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--error-ports", type=float, default=0.02, help="share of ports with any error counter > 0"
    )
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--no-old", action="store_true", help="skip the pre-issue-23 baseline (slow on Selene)")
    ap.add_argument("--tiny", action="store_true", help="generated 144-host fat tree, SQLite: seconds (CI)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    import benchkit

    watch = benchkit.LoadWatch()

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    _django(args.tiny)
    from django.conf import settings
    from django.test import Client

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    name = "tiny" if args.tiny else "selene"
    t0 = time.perf_counter()
    fabric, n_ports = ingest(name, _topology(args.tiny), args.error_ports, args.seed)
    say(f"{name}: {n_ports} ports, counters stored in {time.perf_counter() - t0:.1f} s")
    client = Client(REMOTE_ADDR="127.0.0.1")
    path = f"/metrics?fabric={name}"
    from telemetry import metrics

    metrics._TOPOLOGY.clear()
    _body, cold = _get(client, path, False)  # the first scrape builds the ports' labels (then cached)
    out: dict = {"fabric": name, "ports": n_ports, "server_cold_s": round(cold, 3)}
    out.update(measure(client, path, args.runs))
    out["bytes_per_port"] = round(out["bytes"] / n_ports, 1)
    out["gzip_bytes_per_port"] = round(out["gzip_bytes"] / n_ports, 1)
    say(f"/metrics: {out['bytes'] / 1e6:.2f} MB, gzip {out['gzip_bytes'] / 1e6:.2f} MB, {out['server_s']} s")
    out["per_fabric_job"] = {
        group: measure(client, f"{path}&collect[]={group}", args.runs)
        for group in ("traffic", "errors", "info")
    }
    out["treydock_bytes_per_port"] = round(treydock_bytes(fabric.pk) / n_ports, 1)
    out["ratio_bytes_per_port_vs_treydock"] = round(out["bytes_per_port"] / out["treydock_bytes_per_port"], 3)
    try:
        old = None if args.no_old else old_exposition(fabric.pk)
    except (OSError, subprocess.CalledProcessError) as exc:  # no git, or a clone without that commit
        old, out["old_error"] = None, f"baseline {OLD_COMMIT} not available: {exc}"
    if old is not None:
        body, took = old
        out["old_bytes"], out["old_s"] = len(body), round(took, 3)
        out["old_samples"] = sum(1 for ln in body.splitlines() if ln and not ln.startswith(b"#"))
        out["ratio_bytes_vs_old"] = round(out["bytes"] / len(body), 4)
        out["ratio_s_vs_old"] = round(out["server_s"] / took, 4)
    out["targets_met"] = {k: out[k] <= v for k, v in TARGETS.items()}
    out["counters"] = "ingested directly (one sweep's rows, seeded random values), not read from a lab"
    out.update(watch.verdict())  # load (start, end, peak) and quiet
    out["tiny"] = args.tiny
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
