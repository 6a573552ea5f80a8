"""Benchmark: the ports table ``/ports/`` and its CSV on the Selene compute fabric.

``$WEFT_REALDATA/ibnetdiscover/selene_compute.ibnetdiscover.txt.gz`` (or ``--topology PATH``) is
imported into a scratch database (SQLite, or a new one on ``DATABASE_URL``'s server), every port gets a ``PortCounters``
row (rates, some errors, some congestion), and a Viewer requests pages: the default sort, a sort by
congestion descending, a filtered page (errors > 0), a late page, and the whole CSV. Prints the
median of ``--runs`` per request, the number of SQL queries per page, and the load average.

    python bench/port_table.py [--topology PATH] [--runs 5] [--tiny] [--json]

The last line of stdout is a JSON object, with ``load`` (load averages at start and end) and
``quiet`` (false when the 1-minute load at start was above 0.5). The database is a scratch one:
SQLite in a temporary folder, or a new database on ``DATABASE_URL``'s PostgreSQL server (dropped
at the end, SIGTERM included). ``--tiny``: a 15-node fabric, one run (seconds: the bench runs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from pathlib import Path

import benchkit

REALDATA = benchkit.realdata()
SELENE = REALDATA / "ibnetdiscover" / "selene_compute.ibnetdiscover.txt.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", type=Path, default=SELENE)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="seconds: a 15-node fabric, 1 run")
    parser.add_argument(
        "--json", action="store_true", help="accepted for symmetry: the output is one JSON line"
    )
    args = parser.parse_args()
    if args.tiny:
        args.topology, args.runs = REALDATA / benchkit.TINY_TOPOLOGY, 1
    kit = benchkit.Bench("port-table")
    with kit.scratch_database(benchkit.pg_server_from_env()):
        out = run(args)
    print(json.dumps(kit.finish(out)))
    if not out.get("same_json", True):
        sys.exit("the two modes returned different JSON")


def run(args) -> dict:
    """The measurements on the scratch database (Django set up and migrated here)."""
    benchkit.django_setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from accounts.roles import set_role
    from fabric.models import Port
    from fabric.services.ingest import import_topology_text
    from telemetry.models import PortCounters

    setup_test_environment()
    raw = args.topology.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    fabric = import_topology_text("bench-ports", text, filename=args.topology.name).fabric
    ids = list(Port.objects.filter(node__fabric=fabric).values_list("id", flat=True))
    PortCounters.objects.bulk_create(
        [
            PortCounters(
                port_id=pk,
                xmit_bytes_per_s=float(pk % 997) * 1e7,
                rcv_bytes_per_s=float(pk % 991) * 1e7,
                utilisation=(pk % 100) / 100,
                congestion=(pk % 37) / 37,
                symbol_errors=pk % 50 == 0 and 3 or 0,
                error_deltas={"symbol_errors": 1} if pk % 500 == 0 else None,
            )
            for pk in ids
        ],
        batch_size=2000,
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-viewer")
    set_role(user, "viewer")
    client = Client()
    client.force_login(user)
    base = f"/ports/?fabric={fabric.pk}"
    urls = {
        "page_default": base,
        "page_congestion_desc": base + "&sort=-congestion",
        "page_errors": base + "&errors=1&sort=-errors",
        "page_last": base + "&page=last",
        "page_below_norm": base + "&below=1",
        "csv_all": f"/ports/csv/?fabric={fabric.pk}",
    }
    out: dict = {"topology": args.topology.name, "ports": len(ids), "runs": args.runs}
    for name, url in urls.items():
        times = []
        for _ in range(args.runs):
            with CaptureQueriesContext(connection) as queries:
                t0 = time.monotonic()
                resp = client.get(url)
                body = b"".join(resp.streaming_content) if resp.streaming else resp.content
                times.append(time.monotonic() - t0)
            assert resp.status_code == 200, body[:300]
        out[f"{name}_median_s"] = round(statistics.median(times), 3)
        out[f"{name}_queries"] = len(queries)
        if resp.streaming:
            out["csv_rows"] = body.count(b"\n") - 1
    return out


if __name__ == "__main__":
    main()
