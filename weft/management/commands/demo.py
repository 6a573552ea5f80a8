"""``manage.py demo``: the README's demo in one command.

Migrates the embedded SQLite database, creates an ``admin`` user with a generated password
(printed once), starts a lab fabric (ibsim + OpenSM; by default ``lab.netgen.DEMO_SPEC``, a
non-blocking rail-optimised GPU pod in the DGX SuperPOD shape: 2 scalable units of 16 hosts with
8 HCAs each, one per rail leaf, 8 spines; ``--fat-tree`` takes any other spec, e.g.
``lab.netgen.FAT_TREE_SPEC`` for the earlier 4:1 fat tree of 288 single-HCA hosts), points a
Weft fabric named ``lab`` at it, discovers it, then serves Weft on http://127.0.0.1:8000 with the
in-process worker (discovery and counter polling on their beat schedule), a traffic pattern
played through the lab console so the heatmap moves, and occasional injected faults (a link
flap, an error burst) so alarms appear, and a stream of jobs submitted to the scheduler
(``scheduler.demo``; ``--no-jobs`` leaves it out). Ctrl-C stops everything, the lab processes
included.
"""

from __future__ import annotations

import copy
import json
import logging
import logging.config
import secrets
import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from core.hints import manage_py
from lab.faults import FaultInjector
from lab.netgen import DEMO_SPEC, FAT_TREE_SPEC
from lab.traffic import TrafficPlayer
from weft.management.commands.serve import TrapStartError, add_trap_argument


def brief_console_mail() -> None:
    """Print alert mail as one line each (``core.mail.OneLineConsoleBackend``) when it goes to the
    console (``EMAIL_URL=console://``, the default): the demo's faults would print whole mails."""
    if settings.EMAIL_BACKEND == "django.core.mail.backends.console.EmailBackend":
        settings.EMAIL_BACKEND = "core.mail.OneLineConsoleBackend"


#: Loggers of Weft's own apps: their INFO lines (summaries, a lab's start) stay in the quiet demo log.
WEFT_LOGGERS = (
    "accounts",
    "devices",
    "events",
    "fabric",
    "lab",
    "pools",
    "scheduler",
    "telemetry",
    "ufm",
    "weft",
)


def quiet_logging() -> None:
    """The demo's default log: warnings from everything, and Weft's own INFO summaries; the
    libraries' INFO lines (Celery's beat and worker, axes, Channels) only with ``--verbose``,
    so that the admin's one-time password is not buried under them.

    Written into ``settings.LOGGING`` and applied from there: Celery's Django fix-up runs
    ``django.setup()`` again when the in-process worker imports the task modules, which re-applies
    ``settings.LOGGING`` (a root logger set to WARNING only here went back to INFO, and every
    sign-in printed two axes lines)."""
    config = copy.deepcopy(settings.LOGGING)
    config["root"] = dict(config.get("root", {}), level="WARNING")
    loggers = config.setdefault("loggers", {})
    for name in WEFT_LOGGERS:
        loggers[name] = dict(loggers.get(name, {}), level="INFO")
    settings.LOGGING = config
    logging.config.dictConfig(config)


class Command(BaseCommand):
    help = "Run the demo: a lab fabric discovered, polled and shown live on http://127.0.0.1:8000."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--topology", help="netfile (ibnetdiscover format) instead of a generated fabric")
        parser.add_argument(
            "--fat-tree",
            metavar="SPEC",
            default=DEMO_SPEC,
            help=f"generated topology spec (see manage.py fabric_lab --help); default {DEMO_SPEC} "
            f"(2 SUs x 8 rail leaves x 16 hosts with 8 HCAs, 8 spines, non-blocking); the earlier "
            f"4:1 fat tree is {FAT_TREE_SPEC}",
        )
        parser.add_argument("--fabric", default="lab", help="name of the Weft fabric for the lab")
        parser.add_argument("--poll-interval", type=float, default=5.0, help="seconds between counter sweeps")
        parser.add_argument("--no-traffic", action="store_true", help="do not play the traffic pattern")
        parser.add_argument("--no-faults", action="store_true", help="do not inject faults")
        parser.add_argument(
            "--no-jobs", action="store_true", help="do not submit the stream of demo jobs (scheduler.demo)"
        )
        add_trap_argument(parser)
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="log the libraries' INFO lines too (Celery beat and worker, sign-ins); default: "
            "warnings and Weft's own summaries",
        )

    def handle(self, **opts):
        from lab import Lab, LabError, netgen

        # bad options are a CommandError before anything is migrated, created or started
        if opts["topology"]:
            netfile: str | Path = Path(opts["topology"])
            if not netfile.is_file():
                raise CommandError(f"--topology {netfile}: no such file")
        else:
            try:
                netfile = netgen.parse_spec(opts["fat_tree"])
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        if not settings.EMBEDDED:
            self.stderr.write("demo: DATABASE_URL/REDIS_URL are set; the demo uses them as they are.")
        if not opts["verbose"]:
            quiet_logging()
        from weft.management.commands.serve import restore_ctrl_c

        restore_ctrl_c()  # Ctrl-C stops the demo from its first step, also when started with `&`
        call_command("migrate", interactive=False, verbosity=0)
        brief_console_mail()
        sign_in = self._admin()

        workdir = Path(tempfile.mkdtemp(prefix="weft-demo-lab-"))
        from lab.console_server import ConsoleServer, example

        lab = None
        try:  # from the line that says the lab starts: a Ctrl-C right after it is handled here too
            self.stdout.write("Starting the lab fabric (ibsim + OpenSM)...")
            self.stdout.flush()
            lab = Lab(netfile, workdir=workdir)
            lab.start(timeout=180)  # stops what it started when it fails or is interrupted
            console = ConsoleServer(lab, workdir / "console.sock").start()
        except (LabError, KeyboardInterrupt) as exc:  # Ctrl-C while the lab starts: nothing else runs yet
            if lab is not None:
                lab.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            if isinstance(exc, LabError):
                raise CommandError(f"the lab fabric did not start: {exc}") from exc
            self.stdout.write("\nCtrl-C: stopping the demo...\nDemo stopped; lab processes ended.")
            return
        threads = []
        try:
            fabric, discovery = self._prepare_fabric(opts["fabric"], lab)
            self.stdout.write(
                f"Discovered fabric {fabric.name!r}: {json.dumps(discovery.counts)} (status {discovery.status})"
            )
            from pools.lab import seed_lab_gpus

            gpus = seed_lab_gpus(fabric, 8, mig_every=4)
            self.stdout.write(
                f"Seeded GPUs: {gpus['gpus']} on {gpus['hosts']} hosts, rail-aligned "
                f"({gpus['mig_slices']} MIG slices on every 4th host); /api/pools/gpus/"
            )
            threads = self._background(lab, fabric, opts)
            schedule = dict(settings.CELERY_BEAT_SCHEDULE)
            # one interval everywhere: the beat, the heatmap's staleness and the sweep watchdog read it
            settings.WEFT_POLL_INTERVAL_S = float(opts["poll_interval"])
            poll = dict(schedule["poll-all-fabrics"], schedule=timedelta(seconds=opts["poll_interval"]))
            schedule["poll-all-fabrics"] = poll
            # the lab was discovered just above: the beat's first discovery waits one interval
            schedule["discover-all-fabrics"] = dict(schedule["discover-all-fabrics"], skip_first=True)
            from weft import inprocess

            inprocess.start(beat=True, schedule=schedule)
            self._pools(fabric)  # after the worker starts: the PKeys are applied in the background
            threads += self._jobs(fabric, opts)
            from fabric.services import notices

            notices.start()  # link and port state within seconds (SM notices), in either deployment
            self.stdout.write(
                f"\nWeft demo: open http://{opts['host']}:{opts['port']}/ "
                f"(map: /fabric/map/, heatmap: /heatmap/, alarms: /alarms/). Ctrl-C stops.\n"
                f"Point the diags at the lab: {' '.join(f'{k}={v}' for k, v in lab.tool_env.items())} ibnetdiscover\n"
                f"Pull a cable (another shell; relink puts it back): {example(lab, console.path)}\n"
                f"{sign_in}\n"
            )
            self.stdout.flush()
            from weft.management.commands.serve import serve

            serve(
                opts["host"], opts["port"], worker=False, notices=False, snmp_trap_port=opts["snmp_trap_port"]
            )
        except KeyboardInterrupt:  # Ctrl-C before the server took over: stop as it would
            self.stdout.write("\nCtrl-C: stopping the demo...")
        except TrapStartError as exc:  # the lab and the worker are stopped below
            raise CommandError(str(exc)) from None
        finally:
            for thread in threads:
                thread.stop()
            from fabric.collectors.tools import abort_all
            from fabric.services import notices
            from weft import inprocess

            notices.stop()
            # the demo is ending: kill the tools its in-process tasks run before the lab goes (a
            # sweep, discovery or partitions apply would otherwise hold the exit until its timeout)
            abort_all("the demo is stopping")
            inprocess.stop(wait=False)
            console.stop()
            lab.stop()
            shutil.rmtree(workdir, ignore_errors=True)
            self.stdout.write("Demo stopped; lab processes ended.")

    def _admin(self) -> str:
        """Create the ``admin`` superuser if missing; print the line saying so and return the
        sign-in line (repeated under the demo's address once everything is up, where it is easy to
        find; it does not say "Created" again, as if a second admin had been made)."""
        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            line = (
                "User 'admin' exists (its password was printed when it was created; "
                f"reset it with: {manage_py()} changepassword admin)."
            )
        else:
            password = secrets.token_urlsafe(12)
            User.objects.create_superuser("admin", "admin@localhost", password)
            sign_in = f"Sign in as admin / {password} (shown in this run only)."
            self.stdout.write(f"Created the Weft admin user. {sign_in}")
            return sign_in
        self.stdout.write(line)
        return line

    def _prepare_fabric(self, name: str, lab):
        """The Weft fabric ``name`` pointed at ``lab`` and discovered; returns ``(fabric,
        discovery)``. In this order on an existing database: the previous run's jobs end and the
        new lab is discovered while the fabric names no partitions file, then the lab's OpenSM is
        attached, so nothing is applied to the new lab for hosts it does not have (each of their
        PKey reads would wait out its timeout: 60 s before the demo opened)."""
        from fabric.services.discovery import discover

        fabric, created = self._fabric(name, lab)
        self._end_previous_run(fabric)
        discovery = discover(fabric)
        self._attach_partitions(fabric, lab, created)
        return fabric, discovery

    def _fabric(self, name: str, lab):
        from fabric.models import Fabric

        fabric, created = Fabric.objects.get_or_create(
            name=name, defaults={"description": "Weft demo lab fabric"}
        )
        fabric.tool_env = dict(lab.tool_env)
        fabric.discovery_enabled = True
        fabric.polling_enabled = True
        # no partitions file until the lab is discovered (_attach_partitions): a restarted demo's
        # previous lab, its OpenSM and its file are gone
        fabric.partitions_path = ""
        fabric.sm_pid_file = ""
        fabric.sm_reload_command = []
        fabric.save()
        return fabric, created

    def _attach_partitions(self, fabric, lab, created: bool) -> None:
        """Point ``fabric`` at the lab's OpenSM: it reads this partitions file (-P) and SIGHUP
        makes it re-read it, so pool PKeys are applied as allocations change. On an existing
        database the stored partitions are marked pending (the new OpenSM runs none of them yet;
        the beat's first reconcile would call that drift); ``_pools()`` applies them again."""
        fabric.partitions_path = str(lab.partitions_path)
        fabric.sm_pid_file = str(lab.sm_pid_file)
        fabric.save(update_fields=["partitions_path", "sm_pid_file"])
        if not created:
            from fabric.services.partitions import forget_applied

            forget_applied(fabric, "the demo restarted on a new lab fabric (a new OpenSM)")

    def _end_previous_run(self, fabric) -> list[int]:
        """On an existing database the previous run's jobs still hold GPUs "running" on hosts of a
        lab that is gone: end them (``failed``, with the reason) through the one writer of jobs,
        ``scheduler.services.queue.end_previous_run``, and say so on the console. The previous
        run's expired role leases go too (``core.leases.forget_expired``): the role watch raised a
        Critical ``system.role_down`` for the notice listener before this run took its lease."""
        from core.leases import forget_expired
        from scheduler.services.queue import end_previous_run

        forget_expired()

        ended = end_previous_run(
            fabric, "the demo restarted on a new lab fabric: this job's hosts and run are gone"
        )
        if ended:
            ids = ", ".join(str(pk) for pk in ended[:10]) + (" ..." if len(ended) > 10 else "")
            self.stdout.write(
                f"Existing database: ended {len(ended)} job(s) of the previous demo run still placed or "
                f"running (now failed, reason given on each job page): {ids}"
            )
        return ended

    def _pools(self, fabric) -> None:
        """Two tenants with a pool each (a PKey each, a few allocations) and a shared pool
        (``pools.lab.seed_demo_pools``); the lab's OpenSM is new, so its partitions are applied
        once more unless the seed's own apply already wrote them (``queue_apply``: not when current)."""
        from fabric.services.partitions import queue_apply
        from pools.lab import seed_demo_pools

        out = seed_demo_pools(fabric)
        queue_apply(fabric.pk)
        pkeys = ", ".join(f"{pool} PKey {pkey}" for pool, pkey in out["pkeys"].items())
        kept = out["allocations"] - out["created"]
        standing = f"{out['allocations']} standing allocations holding {out['gpus']} GPUs"
        if kept:  # a restarted demo: the previous run's standing allocations stay (its jobs were ended)
            standing += (
                f" ({kept} kept from the previous run, {out['created']} new; jobs' allocations not counted)"
            )
        self.stdout.write(
            f"Seeded {out['tenants']} tenants, {out['pools']} pools ({pkeys}), {standing}; "
            "the lab's OpenSM applies the PKeys now (/pools/, /fabric/partitions/)"
        )
        for pool, pkeys in out["job_pkeys"].items():
            self.stdout.write(f"  each job placed in {pool} gets its own PKey ({pkeys}): see its job page")
        for line in out["skipped"]:
            self.stdout.write(f"  not allocated: {line}")

    def _jobs(self, fabric, opts) -> list:
        """The job stream (``scheduler.demo.JobStream``) against the demo pools, unless --no-jobs."""
        if opts["no_jobs"]:
            return []
        from scheduler.demo import JobStream

        stream = JobStream(fabric)
        stream.start()
        self.stdout.write(
            "Submitting demo jobs every 20 s (mixed sizes, priorities and tenants; preemptible fill jobs keep "
            "the fabric nearly full so preemptions show): /scheduler/"
        )
        return [stream]

    def _hca_faults(self, lab, fabric, opts) -> dict:
        """The injector's HCA cable pulls: cables of hosts running demo jobs (not the SM's), so the
        admin sees a job degraded, then requeued or replaced per its on_fault (none with --no-jobs)."""
        if opts["no_jobs"]:
            return {}
        from scheduler.demo import running_job_hcas

        sm = lab.tool_env.get("SIM_HOST", "")
        net = getattr(lab, "net", None)
        sm_names = {n.description for n in (net.nodes if net is not None else []) if n.node_id == sm} | {sm}
        self.stdout.write(
            "Faults sometimes pull an HCA cable of a host running a demo job: watch the job page go degraded, "
            "then requeued or replaced per its on_fault, and the tenant's mail below"
        )
        return {"hca_targets": lambda: running_job_hcas(fabric.pk, sm_names)}

    def _background(self, lab, fabric, opts) -> list:
        threads = []
        if not opts["no_traffic"]:
            busy = {}
            if not opts["no_jobs"]:  # the hot spots carry the jobs: their busiest ports stay hot
                from scheduler.demo import BusyJobPorts

                busy = {"busy": BusyJobPorts(fabric.pk)}
            player = TrafficPlayer(
                lab,
                fabric,
                interval=min(0.5, opts["poll_interval"] / 4),
                poll_interval_s=opts["poll_interval"],
                **busy,
            )
            player.start()
            threads.append(player)
        if not opts["no_faults"]:
            injector = FaultInjector(lab, interval=90.0, **self._hca_faults(lab, fabric, opts))
            injector.start()
            threads.append(injector)
        return threads
