"""``manage.py fabric_lab --topology PATH | --fat-tree SPEC``: run a lab fabric in the foreground.

Starts ibsim on the netfile (or a generated fat tree / rail pod), OpenSM (optionally with a
partitions file and a standby OpenSM), waits until the SM is MASTER, prints how to point the
infiniband-diags and Weft at it, and runs until Ctrl-C or SIGTERM, then stops OpenSM and ibsim by
pid. The last stdout line is a JSON summary.
"""

from __future__ import annotations

import json
import shlex
import signal
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from core.hints import manage_py
from lab.console_server import ConsoleServer, example
from lab.netgen import DEMO_SPEC


class _Stop(Exception):
    pass


def _raise_stop(signum, frame):
    raise _Stop(signal.Signals(signum).name)


class Command(BaseCommand):
    help = (
        "Run a simulated InfiniBand fabric (ibsim + OpenSM) in the foreground and print how to point "
        "the diags and Weft at it. Fat-tree specs: '2:leaves=8,spines=4,hosts=16,speed=HDR[,links=1]' "
        "(hosts per leaf: 8 x 16 = 128 hosts; links: cables from each leaf to each spine), "
        "'3:pods=2,leaves=4,spines=4,cores=8,hosts=8,speed=HDR' (hosts per leaf, leaves per pod), "
        "'rail:hosts=32,rails=8[,su=16][,spines=8],speed=NDR' (rail-optimised pod: hosts in all, su hosts "
        f"per scalable unit, each with one leaf per rail; the demo's is '{DEMO_SPEC}'). "
        "Ctrl-C or SIGTERM stops it."
    )

    def add_arguments(self, parser):
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--topology", metavar="PATH", help="netfile / ibnetdiscover output (.gz accepted)"
        )
        source.add_argument("--fat-tree", metavar="SPEC", help="generated topology spec (see above)")
        parser.add_argument("--partitions", metavar="FILE", help="OpenSM partitions file")
        parser.add_argument(
            "--sm-node", metavar="NODE", help="CA the master OpenSM runs on (default: first CA)"
        )
        parser.add_argument("--standby-sm", metavar="NODE", help="CA running a second, standby OpenSM")
        parser.add_argument(
            "--opensm-conf",
            metavar="KEY=VALUE",
            action="append",
            default=[],
            help="extra opensm.conf option, e.g. sweep_interval=5 (repeatable)",
        )
        parser.add_argument(
            "--workdir", metavar="DIR", help="keep the lab's files there (default: a temp dir)"
        )
        parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for MASTER")
        parser.add_argument(
            "--register",
            metavar="FABRIC",
            help="create/update the Weft fabric FABRIC with the lab's tool_env, so discover/poll reach it",
        )
        parser.add_argument(
            "--write-netfile", metavar="PATH", help="also save the netfile used (generated specs)"
        )

    def handle(self, *args, **opts):
        from lab import Lab, LabError, netgen

        if opts["topology"]:
            netfile: str | Path = Path(opts["topology"])
            if not netfile.is_file():
                raise CommandError(f"--topology {netfile}: no such file")
            label = str(netfile)
        else:
            try:
                netfile = netgen.parse_spec(opts["fat_tree"])
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            label = f"--fat-tree {opts['fat_tree']}"
            if opts["write_netfile"]:
                Path(opts["write_netfile"]).write_text(netfile)
        conf = {}
        for item in opts["opensm_conf"]:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise CommandError(f"--opensm-conf {item!r}: expected KEY=VALUE")
            conf[key.strip()] = value.strip()
        if opts["partitions"] and not Path(opts["partitions"]).is_file():
            raise CommandError(f"--partitions {opts['partitions']}: no such file")

        previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        lab = console = None
        reason = "stopped"
        status = 0
        try:
            try:
                lab = Lab(
                    netfile,
                    partitions=opts["partitions"],
                    standby_sm=opts["standby_sm"],
                    sm_node=opts["sm_node"],
                    opensm_conf=conf,
                    workdir=Path(opts["workdir"]) if opts["workdir"] else None,
                )
                self.stdout.write(
                    f"Starting lab {label}: {len(lab.net.switches)} switches, {len(lab.net.cas)} CAs, "
                    f"{len(lab.net.links)} links..."
                )
                self.stdout.flush()
                lab.start(timeout=opts["timeout"])
            except LabError as exc:
                raise CommandError(f"the lab did not start: {exc}") from exc
            sm = lab.sm_info()
            console = ConsoleServer(lab, lab.workdir / "console.sock").start()
            if opts["register"]:
                self._register(opts["register"], lab)
            self._instructions(lab, sm, opts["register"])
            while True:
                time.sleep(1.0)
                try:
                    lab.check()
                except LabError as exc:
                    reason, status = f"lab failed: {exc}", 1
                    self.stderr.write(reason)
                    break
        except _Stop as stop:
            reason = f"stopped by {stop}"
        finally:
            for sig in previous:  # a second Ctrl-C must not interrupt the orderly stop
                signal.signal(sig, signal.SIG_IGN)
            if console is not None:
                console.stop()
            uptime = time.time() - lab.started_at if lab is not None and lab.started_at else 0.0
            summary = {
                "status": "failed" if status else "stopped",
                "reason": reason,
                "start_seconds": round(lab.start_seconds, 2)
                if lab is not None and lab.start_seconds
                else None,
                "uptime_seconds": round(uptime, 1),
            }
            if lab is not None:
                summary.update(switches=len(lab.net.switches), cas=len(lab.net.cas), links=len(lab.net.links))
                lab.stop()
            self.stdout.write(json.dumps(summary))
            self.stdout.flush()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if status:
            sys.exit(status)

    def _register(self, name: str, lab) -> None:
        from fabric.models import Fabric

        fabric, created = Fabric.objects.get_or_create(name=name, defaults={"description": "fabric lab"})
        from django.db import transaction

        from fabric.services.requests import discover_new_fabric

        with transaction.atomic():
            fabric.tool_env = dict(lab.tool_env)
            fabric.partitions_path = str(lab.partitions_path)
            fabric.sm_pid_file = str(lab.sm_pid_file)
            # every OpenSM of the lab by its port GUID: an apply after a fail-over signals the new master
            fabric.sm_pid_files = lab.sm_pid_files if len(lab.sm_pid_files) > 1 else {}
            fabric.save(update_fields=["tool_env", "partitions_path", "sm_pid_file", "sm_pid_files"])
            # a new lab: its first discovery now, not at the next periodic one (audited, on commit)
            discover_new_fabric(fabric)
        self.stdout.write(
            f"{'Created' if created else 'Updated'} Weft fabric {name!r} with the lab's tool_env; "
            "its discovery is queued."
        )

    def _instructions(self, lab, sm: dict, fabric: str | None) -> None:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in lab.tool_env.items())
        master = lab.node(sm["guid"])
        name = fabric or "lab"
        lines = [
            f"Lab fabric up in {lab.start_seconds:.1f}s (work directory {lab.workdir}).",
            f"Master SM: {master.description!r} port GUID {sm['guid']} LID {sm['lid']} priority {sm['priority']}.",
            *[f"Warning: {w}" for w in lab.warnings],
            "",
            "Point the infiniband-diags at it (any shell):",
            f"  export {env}",
            "  ibnetdiscover        # or: sminfo, iblinkinfo, perfquery -x <lid> 1, smpquery pkeys <lid> 1",
            "",
            "Point Weft at it:",
            f"  a fabric whose tool_env is {json.dumps(lab.tool_env)}",
        ]
        if not fabric:
            lines.append(f"  (fabric_lab --register {name} stores it), or through the REST API:")
            lines.append(
                f'  POST /api/fabric/fabrics/ {{"name": "{name}", "tool_env": {json.dumps(lab.tool_env)}}}'
            )
        lines += [
            f"  {manage_py()} discover --fabric {name}",
            f"  {manage_py()} import_topology {lab.workdir / 'fabric.net'} --fabric {name}-netfile",
            "",
            "Pull a cable from any shell (relink puts it back; raw runs any ibsim console command):",
            f"  {example(lab, lab.workdir / 'console.sock')}",
            "",
            "Ctrl-C (or SIGTERM) stops OpenSM and ibsim.",
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()
