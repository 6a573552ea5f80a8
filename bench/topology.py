"""Benchmark: topology parse and ingest against ``ibnetdiscover``'s own time (ratios, not a timed test).

On the Selene compute fabric (``$WEFT_REALDATA/ibnetdiscover/selene_compute.ibnetdiscover.txt.gz``,
666 switches, 4,341 CAs, 12,852 links) or ``--topology PATH``:

* ``parse_s``: :func:`fabric.parsers.detect_and_parse` on the text (best of ``--runs``);
* ``ingest_s``: ingest into an empty fabric on PostgreSQL (a scratch database created and
  dropped here, ``--pg-url`` server; best of ``--runs``, each into a new fabric), ``ingest_rows``;
* ``reingest_s``/``reingest_rows``: the same text again (target: 0 rows);
* ``ibnetdiscover_s``: the real ``ibnetdiscover`` on the same fabric loaded into the lab (ibsim +
  OpenSM + umad2sim), best of ``--runs``; ``lab_start_s`` how long the lab took to come up;
* ``live_s``: :func:`fabric.services.discovery.discover` of that lab fabric (ibnetdiscover + sminfo
  + parse + unchanged ingest), after one first live discovery; ``live_collect_s`` the collector alone
  (ibnetdiscover + sminfo) and ``live_ibnetdiscover_s`` its ibnetdiscover run;
* ``ratio`` = (parse_s + ingest_s) / ibnetdiscover_s (target ≤ 1.0), plus ``parse_ratio``,
  ``ingest_ratio``, ``reingest_ratio`` and ``live_ratio`` (each over ibnetdiscover_s).

Other apps' ``discovery_committed`` listeners are detached so the numbers are the fabric ingest's.

    python bench/topology.py [--topology PATH] [--runs 3] [--no-lab] [--json]

The last line of stdout is the JSON object.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import uuid
from pathlib import Path

BASE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(BASE))
REALDATA = Path(os.environ.get("WEFT_REALDATA", BASE.parent / "shared" / "realdata"))
SELENE = REALDATA / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"


def read(path: Path) -> str:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", "replace")


def scratch_database(server_url: str) -> tuple[str, callable]:
    """Create an empty PostgreSQL database on ``server_url``; returns its URL and a drop function."""
    import psycopg

    name = f"weft_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server_url}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(f"{server_url}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"{server_url}/{name}", drop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", type=Path, default=SELENE)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--pg-url", default=os.environ.get("WEFT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")
    )
    ap.add_argument("--no-lab", action="store_true", help="skip the lab (ibnetdiscover_s, live_s)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args()

    def say(msg: str) -> None:
        if not args.json:
            print(msg, flush=True)

    text = read(args.topology)
    db_url, drop = scratch_database(args.pg_url)
    os.environ["DATABASE_URL"] = db_url
    os.environ.pop("REDIS_URL", None)  # embedded mode otherwise: no broker needed for the bench
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from fabric.models import Fabric
    from fabric.parsers import detect_and_parse
    from fabric.services.ingest import ingest_topology
    from fabric.signals import discovery_committed

    out: dict = {"topology": args.topology.name}
    try:
        call_command("migrate", verbosity=0, interactive=False)
        discovery_committed.receivers = []
        discovery_committed.sender_receivers_cache.clear()

        times = []
        for _ in range(max(1, args.runs)):
            t0 = time.perf_counter()
            topo = detect_and_parse(text, args.topology.name)
            times.append(time.perf_counter() - t0)
        out["parse_s"] = round(min(times), 4)
        out.update({k: v for k, v in topo.counts().items()})
        say(f"parse: {out['parse_s']:.3f} s ({topo.counts()})")

        times = []
        for run in range(max(1, args.runs)):
            fabric = Fabric.objects.create(name=f"bench-{run}")
            t0 = time.perf_counter()
            first = ingest_topology(fabric, topo, source="file")
            times.append(time.perf_counter() - t0)
        out["ingest_s"] = round(min(times), 4)
        out["ingest_rows"] = first.rows_written
        say(
            f"ingest (PostgreSQL, empty fabric): {out['ingest_s']:.3f} s (best of {len(times)}), "
            f"{first.rows_written} rows"
        )

        t0 = time.perf_counter()
        again = ingest_topology(fabric, detect_and_parse(text, args.topology.name), source="file")
        out["reingest_s"] = round(time.perf_counter() - t0, 4)
        out["reingest_rows"] = again.rows_written
        say(f"unchanged re-ingest (parse included): {out['reingest_s']:.3f} s, {again.rows_written} rows")

        if not args.no_lab:
            from fabric.collectors.tools import fabric_env, run_tool
            from fabric.services.discovery import discover
            from lab import Lab

            t0 = time.perf_counter()
            lab = Lab(args.topology).start(timeout=900)
            out["lab_start_s"] = round(time.perf_counter() - t0, 2)
            say(f"lab up in {out['lab_start_s']} s")
            try:
                live = Fabric.objects.create(
                    name="bench-live", tool_env=dict(lab.tool_env), discovery_timeout_s=900
                )
                env = fabric_env(live)
                times = []
                for _ in range(max(1, args.runs)):
                    res = run_tool(["ibnetdiscover"], env=env, timeout=900)
                    if res.returncode != 0:
                        raise SystemExit(f"ibnetdiscover failed: {res.stderr[-500:]}")
                    times.append(res.duration_s)
                out["ibnetdiscover_s"] = round(min(times), 4)
                say(f"ibnetdiscover: {out['ibnetdiscover_s']:.3f} s (best of {len(times)})")
                from fabric.collectors.ibnetdiscover import collect_topology

                t0 = time.perf_counter()
                collected = collect_topology(live)
                out["live_collect_s"] = round(time.perf_counter() - t0, 4)
                out["live_ibnetdiscover_s"] = collected.duration_s
                t0 = time.perf_counter()
                d = discover(live)
                out["live_first_s"] = round(time.perf_counter() - t0, 4)
                t0 = time.perf_counter()
                d = discover(live)
                out["live_s"] = round(time.perf_counter() - t0, 4)
                out["live_rows"] = d.rows_written
                out["live_status"] = d.status
                out["live_counts"] = {k: d.counts[k] for k in ("switches", "cas", "routers", "links")}
                out["counts_match"] = all(out["live_counts"][k] == out[k] for k in out["live_counts"])
                say(
                    f"live discovery: first {out['live_first_s']:.3f} s, unchanged {out['live_s']:.3f} s "
                    f"({d.rows_written} rows)"
                )
            finally:
                lab.stop()
            ib = out["ibnetdiscover_s"]
            out["ratio"] = round((out["parse_s"] + out["ingest_s"]) / ib, 3)
            out["parse_ratio"] = round(out["parse_s"] / ib, 3)
            out["ingest_ratio"] = round(out["ingest_s"] / ib, 3)
            out["reingest_ratio"] = round(out["reingest_s"] / ib, 3)
            out["live_ratio"] = round(out["live_s"] / ib, 3)
            say(f"ratio (parse + ingest) / ibnetdiscover = {out['ratio']}  (target <= 1.0)")
            say(
                f"parse {out['parse_ratio']}x, ingest {out['ingest_ratio']}x, re-ingest {out['reingest_ratio']}x, "
                f"live discovery {out['live_ratio']}x of ibnetdiscover"
            )
    finally:
        drop()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
