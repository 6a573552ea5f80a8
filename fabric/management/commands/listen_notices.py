"""``manage.py listen_notices``: the SM-notice listeners of every live fabric, in the foreground.

The production deployment's long-running process for link and port state within seconds
(``fabric.services.notices``): one listener child per live fabric, subscribed to the master SM's
notices, re-subscribed after an SM failover, restarted when it dies; new fabrics are picked up
every ``WEFT_NOTICE_RESCAN_S``. Run exactly one, under a supervisor that restarts it (the README's
systemd unit). SIGTERM or Ctrl-C stops it and its children; the last line of stdout is a JSON
summary (fabrics listened to, notices, refreshes).
"""

from __future__ import annotations

import json
import signal
import threading

from django.core.management.base import BaseCommand

from fabric.services.notice_status import notice_status
from fabric.services.notices import NoticeSupervisor


class Command(BaseCommand):
    help = "Listen to the SM notices of every live fabric until stopped (production; README)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--seconds",
            type=float,
            default=None,
            help="stop after this many seconds (default: run until stopped)",
        )

    def handle(self, *args, seconds=None, **opts):
        done = threading.Event()

        def _stop(signum, frame):
            done.set()

        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, _stop)
        supervisor = NoticeSupervisor()
        supervisor.start()
        self.stdout.write("listening to SM notices of the live fabrics (SIGTERM or Ctrl-C stops)")
        self.stdout.flush()
        try:
            done.wait(seconds)
            fabric_ids = sorted(supervisor.listeners)
            statuses = [notice_status(i) or {"fabric": i, "state": "stopped"} for i in fabric_ids]
        finally:
            supervisor.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        self.stdout.write(json.dumps({"fabrics": len(fabric_ids), "listeners": [
            {k: s.get(k) for k in ("fabric", "state", "sm_lid", "notices", "refreshes", "fallback_reads")}
            for s in statuses
        ]}))  # fmt: skip
