"""Benchmark: ``GET /api/fabric/ports/?limit=N`` against DRF's stock way of serialising the same
page, measured in the same run (ratios, not a timed test).

On the Selene compute fabric (``$WEFT_REALDATA/ibnetdiscover/selene_compute.ibnetdiscover.txt.gz``,
~46k ports) or ``--topology PATH``, imported into a scratch database (SQLite, or a new one on ``DATABASE_URL``'s server
when set, dropped after), a Viewer requests the port list with ``limit`` rows, alternating:

* ``weft``: the serializers as they are (``IdentityUrlField``: one URL resolution per field and
  request; the link and remote end serialised by one nested serializer per request);
* ``stock``: the same serializers with DRF's ``HyperlinkedIdentityField.get_url`` (a ``reverse()``
  per row and URL) and a new nested serializer per row for the link and the remote end (what
  Weft did before).

Prints per mode the median and spread of ``--runs`` requests, the ratio stock / weft, and checks
that both modes return the same JSON.

    python bench/api_lists.py [--topology PATH] [--limit 1000] [--runs 5] [--tiny] [--json]

The last line of stdout is the JSON object, with ``load`` (load averages at start and end) and
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
    parser.add_argument("--limit", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiny", action="store_true", help="seconds: a 15-node fabric, 1 run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        args.topology, args.runs = REALDATA / benchkit.TINY_TOPOLOGY, 1
    kit = benchkit.Bench("api-lists")
    with kit.scratch_database(benchkit.pg_server_from_env()):
        out = run(args)
    print(json.dumps(kit.finish(out)))
    if not out.get("same_json", True):
        sys.exit("the two modes returned different JSON")


def run(args) -> dict:
    """The measurements on the scratch database (Django set up and migrated here)."""
    benchkit.django_setup()
    from django.test import Client
    from django.test.utils import setup_test_environment
    from rest_framework import serializers as drf

    from accounts.roles import set_role
    from fabric.api import serializers as s
    from fabric.models import Port
    from fabric.services.ingest import import_topology_text

    setup_test_environment()  # the test client's ALLOWED_HOSTS
    raw = args.topology.read_bytes()
    text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode()
    t0 = time.monotonic()
    import_topology_text("bench-api", text, filename=args.topology.name)
    import_s = time.monotonic() - t0
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username="bench-viewer")
    set_role(user, "viewer")
    client = Client()
    client.force_login(user)
    url = f"/api/fabric/ports/?limit={args.limit}&ordering=id"

    weft_url, weft_remote, weft_link = (
        s.IdentityUrlField.get_url,
        s.RemoteEndField.to_representation,
        s.PortSerializer.get_link,
    )

    def stock_remote(self, port):
        remote = port.remote
        return None if remote is None else s.PortSerializer(remote, nested=True, context=self.context).data

    def stock_link(self, port):
        link = port.link
        return None if link is None else s.LinkSerializer(link, nested=True, context=self.context).data

    def mode(name: str) -> None:
        stock = name == "stock"
        s.IdentityUrlField.get_url = drf.HyperlinkedIdentityField.get_url if stock else weft_url
        s.RemoteEndField.to_representation = stock_remote if stock else weft_remote
        s.PortSerializer.get_link = stock_link if stock else weft_link

    times: dict[str, list[float]] = {"weft": [], "stock": []}
    bodies: dict[str, bytes] = {}
    for _ in range(args.runs):
        for name in ("stock", "weft"):  # alternating: load drifts hit both alike
            mode(name)
            t0 = time.monotonic()
            resp = client.get(url)
            times[name].append(time.monotonic() - t0)
            assert resp.status_code == 200, resp.content[:500]
            bodies[name] = resp.content
    mode("weft")
    same = json.loads(bodies["weft"]) == json.loads(bodies["stock"])
    out = {
        "topology": args.topology.name,
        "ports": Port.objects.count(),
        "import_s": round(import_s, 2),
        "limit": args.limit,
        "runs": args.runs,
        "same_json": same,
    }
    for name, values in times.items():
        out[f"{name}_median_s"] = round(statistics.median(values), 4)
        out[f"{name}_min_s"] = round(min(values), 4)
        out[f"{name}_max_s"] = round(max(values), 4)
    # the ratio with each side's absolute seconds beside it (weft_median_s, stock_median_s)
    out["ratio_stock_over_weft"] = round(out["stock_median_s"] / out["weft_median_s"], 2)
    if not args.json:
        for key, value in out.items():
            print(f"{key:24} {value}")
    return out


if __name__ == "__main__":
    main()
