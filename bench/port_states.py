"""Link-state benchmark: SM-notice latency and the MAD cost of the port-state fallback, on a lab.

For one topology (default: the demo's fabric, ``lab.netgen.DEMO_SPEC``: a rail-optimised pod of 2
scalable units x 8 rail leaves x 16 hosts with 8 HCAs, 8 spines; ``--topology``
for a netfile such as the Selene compute fabric) it:

1. starts the lab (ibsim + OpenSM) and discovers it into Weft;
2. starts a notice listener (``fabric.services.notices.NoticeListener``, fallback off) and waits
   until the SA confirmed the subscription;
3. flaps ``--flaps`` switch-to-switch cables one after the other (``--gap`` seconds after each
   ``link.up``): from the ``Unlink`` on ibsim's console to the ``link.down`` event committed
   (polled every 5 ms), then from ``ReLink`` to ``link.up``; medians and maxima;
4. the fallback: the PortInfo SMPs one fallback read sends (``fallback_targets``) and how long the
   read takes through a second listener child (answers in the lab's ibsim; on hardware each SMP
   costs a switch's SMA time).

``python bench/port_states.py [--topology PATH | --fat-tree SPEC] [--flaps N] [--gap S] [--json]``; the last
line is a JSON object: ``links``, ``switch_ports``, ``notice_down_s``/``notice_up_s`` (median),
``notice_down_max_s``, ``fallback_mads``, ``fallback_mads_per_link``, ``fallback_read_s``, ``load`` (load averages at start and end) and ``quiet`` (false when the
1-minute load at start was above 0.5). On a scratch database (SQLite in a temporary folder, or a
new one on ``DATABASE_URL``'s PostgreSQL server), dropped at the end; SIGTERM stops the lab too.
``--tiny``: one flap (the bench runs). Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import benchkit


def _wait(condition, timeout: float, what: str, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def bench(
    netfile,
    name: str,
    flaps: int,
    say,
    gap: float = 0.0,
    kit: benchkit.Bench | None = None,
    wait_s: float = 30.0,
) -> dict:
    from events.models import Event
    from fabric.models import Fabric, Link, Port
    from fabric.services.discovery import discover
    from fabric.services.notice_status import notice_status
    from fabric.services.notices import NoticeChild, NoticeListener, fallback_targets, listener_command
    from lab import Lab

    lab = Lab(netfile)
    if kit is not None:
        kit.stops(lab)  # stopped on SIGTERM too
    lab.start(timeout=900)
    listener = None
    try:
        Fabric.objects.filter(name=name).delete()
        fabric = Fabric.objects.create(name=name, tool_env=lab.tool_env, discovery_timeout_s=900)
        discover(fabric, timeout=900)
        fabric.refresh_from_db()
        listener = NoticeListener(fabric.pk, fallback="off")
        listener.start()
        _wait(lambda: (notice_status(fabric.pk) or {}).get("state") == "subscribed", 60, "subscribed", 0.1)
        switches = {n.node_id for n in lab.net.switches}
        cables = sorted(a for a, b in lab.net.links if a[0] in switches and b[0] in switches)[:flaps]
        down, up = [], []
        for node, port in cables:
            last = (
                Event.objects.filter(fabric=fabric).order_by("-id").values_list("id", flat=True).first() or 0
            )
            t0 = time.monotonic()
            lab.unlink(node, port)
            _wait(lambda last=last: Event.objects.filter(fabric=fabric, code="link.down", id__gt=last).exists(),
                  wait_s, "link.down")  # fmt: skip
            down.append(time.monotonic() - t0)
            t0 = time.monotonic()
            lab.relink(node, port)
            _wait(lambda last=last: Event.objects.filter(fabric=fabric, code="link.up", id__gt=last).exists(),
                  wait_s, "link.up")  # fmt: skip
            up.append(time.monotonic() - t0)
            say(f"flap {node}[{port}]: link.down {down[-1]:.3f} s, link.up {up[-1]:.3f} s")
            time.sleep(gap)  # quiet time between flaps (the work after the link.up finishes first)
        listener.stop()
        listener = None
        targets = fallback_targets(fabric)
        mads = sum(len(p) + 1 for p in targets.values())  # PortInfo per port, NodeInfo per switch
        argv, env, _ = listener_command(fabric, attempt=1)
        child = NoticeChild(argv, env)
        try:
            _wait(lambda: (child.get(1.0) or {}).get("type") == "subscribed", 60, "the second child", 0)
            t0 = time.monotonic()
            child.send({"cmd": "portinfo", "id": 1, "targets": [[lid, p] for lid, p in targets.items()]})
            reply = _wait(
                lambda: (m := child.get(1.0)) and m.get("type") == "portinfo" and m, 300, "portinfo", 0
            )
            read_s = time.monotonic() - t0
        finally:
            child.close()
        links = Link.objects.filter(fabric=fabric).count()
        out = {
            "topology": name,
            "links": links,
            "switch_ports": Port.objects.filter(
                node__fabric=fabric, node__node_type="switch", port_num__gte=1
            ).count(),
            "flaps": len(down),
            "notice_down_s": round(statistics.median(down), 4) if down else None,
            "notice_down_max_s": round(max(down), 4) if down else None,
            "notice_up_s": round(statistics.median(up), 4) if up else None,
            "fallback_mads": mads,
            "fallback_mads_per_link": round(mads / max(links, 1), 3),
            "fallback_answered": sum(1 for p in reply["ports"] if p[2] is not None),
            "fallback_read_s": round(read_s, 4),
            "fallback_read_child_s": reply.get("elapsed_s"),
        }
        fabric.delete()
        return out
    finally:
        if listener is not None:
            listener.stop()
        lab.stop()


def main(argv: list[str] | None = None) -> int:
    from lab.netgen import DEMO_SPEC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", help="netfile (ibnetdiscover format, gzip ok)")
    ap.add_argument(
        "--fat-tree",
        default=DEMO_SPEC,
        help=f"generated topology spec (default: the demo's, {DEMO_SPEC})",
    )
    ap.add_argument("--flaps", type=int, default=5)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds between a link.up and the next flap")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to wait for each link event")
    ap.add_argument("--tiny", action="store_true", help="the default topology, one flap, --wait 120")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    args = ap.parse_args(argv)
    if args.tiny:
        # one flap of the demo's fabric (a 2-leaf fat tree never saw its notice in 30 s)
        args.topology, args.fat_tree, args.flaps, args.wait = None, DEMO_SPEC, 1, max(args.wait, 120.0)
    kit = benchkit.Bench("port-states")
    with kit.scratch_database(benchkit.pg_server_from_env()):
        benchkit.django_setup()
        out = run(args, kit)
    print(json.dumps(kit.finish(out)))
    return 0


def run(args, kit: benchkit.Bench) -> dict:
    """The topology of ``args`` benched on the scratch database."""
    from lab import netgen

    say = (lambda *a: None) if args.json else print
    if args.topology:
        netfile, name = Path(args.topology), "bench-" + Path(args.topology).name.split(".")[0][:40]
    else:
        netfile, name = netgen.parse_spec(args.fat_tree), "bench-fat-tree"
    return bench(netfile, name.replace("_", "-").lower(), args.flaps, say, args.gap, kit, args.wait)


if __name__ == "__main__":
    sys.exit(main())
