"""``manage.py serve``: the embedded deployment's single process.

Runs the ASGI application (HTTP + websockets) with daphne and, in the embedded deployment, the
in-process Celery worker and beat (``weft.inprocess``) and the SM-notice listeners of the live
fabrics (``fabric.services.notices``, unless ``WEFT_NOTICES`` is off), until Ctrl-C/SIGTERM.
With ``--snmp-trap-port`` (default ``WEFT_SNMP_TRAP_PORT``; 0: off) it also receives SNMP traps
(``devices.services.traps.BackgroundReceiver``, on the host of ``WEFT_SNMP_TRAP_LISTEN``): a
port that cannot be bound stops the command with one clear line before anything else starts.
In production run ``daphne weft.asgi:application``, ``celery -A weft worker -Q control`` and ``-Q fabric``,
``celery -A weft beat``, ``manage.py listen_notices`` and ``manage.py snmp_traps`` instead (README).
"""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Serve Weft (daphne ASGI) with the in-process worker and beat (embedded deployment)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="do not run the in-process worker")
        parser.add_argument("--no-beat", action="store_true", help="run the worker but not the schedule")
        parser.add_argument("--no-notices", action="store_true", help="do not listen to SM notices")
        add_trap_argument(parser)

    def handle(self, host, port, no_worker, no_beat, no_notices, snmp_trap_port, **opts):
        try:
            serve(host, port, worker=not no_worker, beat=not no_beat, notices=not no_notices,
                  snmp_trap_port=snmp_trap_port, stdout=self.stdout)  # fmt: skip
        except TrapStartError as exc:
            raise CommandError(str(exc)) from None


class TrapStartError(Exception):
    """The SNMP trap receiver of ``serve`` could not start (its address is in use or privileged)."""


def add_trap_argument(parser) -> None:
    """``--snmp-trap-port`` (serve and demo)."""
    parser.add_argument(
        "--snmp-trap-port", type=int, default=settings.WEFT_SNMP_TRAP_PORT, metavar="PORT",
        help="receive SNMP traps on this UDP port (host of WEFT_SNMP_TRAP_LISTEN); 0: off "
        "(default WEFT_SNMP_TRAP_PORT)",
    )  # fmt: skip


def start_traps(port: int, stdout=None):
    """Start the SNMP trap receiver on ``port`` (the host of ``WEFT_SNMP_TRAP_LISTEN``) in a thread;
    None when ``port`` is 0.

    Raises:
        TrapStartError: the port is out of range, in use or privileged (nothing left running).
    """
    if not port:
        return None
    from devices.management.commands.snmp_traps import parse_listen
    from devices.services.traps import BackgroundReceiver, TrapListenError

    if not 0 < port < 65536:
        raise TrapStartError(f"--snmp-trap-port {port}: expected 1-65535, or 0 for no trap receiver")
    host, _ = parse_listen(settings.WEFT_SNMP_TRAP_LISTEN)
    try:
        traps = BackgroundReceiver((host, port)).start()
    except TrapListenError as exc:
        raise TrapStartError(str(exc)) from None
    if stdout is not None:
        stdout.write(f"Receiving SNMP traps on {host}:{port} (udp).")
    return traps


def restore_ctrl_c() -> None:
    """Give SIGINT Python's handler (``KeyboardInterrupt``) in the main thread: a process started
    in the background by a non-interactive shell (``cmd &``, ``nohup``) inherits SIGINT ignored,
    Python then installs no handler, and Twisted leaves it so; with this, Ctrl-C or ``kill -INT``
    always stops the server or the demo (POSIX, Shell Command Language, 2.11 "Signals and Error
    Handling"). A no-op outside the main thread."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def serve(
    host: str,
    port: int,
    *,
    worker: bool = True,
    beat: bool = True,
    notices: bool = True,
    snmp_trap_port: int = 0,
    stdout=None,
) -> None:
    """Run daphne on ``host:port`` (blocking) with, when embedded, the in-process worker and (with
    ``notices`` and ``WEFT_NOTICES``) the SM-notice listeners, and with ``snmp_trap_port`` the SNMP
    trap receiver (:func:`start_traps`).

    Raises:
        TrapStartError: the trap port cannot be bound (raised before anything else starts).
    """
    from channels.routing import get_default_application
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    from weft import inprocess

    restore_ctrl_c()
    traps = start_traps(snmp_trap_port, stdout)  # first: a busy port fails before anything runs
    if worker and settings.EMBEDDED:
        inprocess.start(beat=beat)
    listening = notices and settings.EMBEDDED and settings.WEFT_NOTICES
    if listening:
        from fabric.services import notices as notice_listeners

        notice_listeners.start()
    if stdout is not None:
        mode = "embedded (SQLite, in-process worker)" if settings.EMBEDDED else "production"
        stdout.write(f"Weft serving on http://{host}:{port}/ — {mode}. Ctrl-C stops.")
        stdout.flush()
    try:
        Server(
            application=get_default_application(),
            endpoints=build_endpoint_description_strings(host=host, port=port),
            signal_handlers=True,
        ).run()
    finally:
        if traps is not None:
            traps.stop()
        if listening:
            notice_listeners.stop()
        if worker and settings.EMBEDDED:
            # the process is ending: kill the tools its in-process tasks run (a sweep or discovery
            # would otherwise hold the interpreter's exit until its tool timed out)
            from fabric.collectors.tools import abort_all

            abort_all("Weft is stopping")
        inprocess.stop(wait=False)
