"""``manage.py serve``: the embedded deployment's single process.

Runs the ASGI application (HTTP + websockets) with daphne and, in the embedded deployment, the
in-process Celery worker and beat (``weft.inprocess``) and the SM-notice listeners of the live
fabrics (``fabric.services.notices``, unless ``WEFT_NOTICES`` is off), until Ctrl-C/SIGTERM.
In production run ``daphne weft.asgi:application``, ``celery -A weft worker``,
``celery -A weft beat`` and ``manage.py listen_notices`` instead (README).
"""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Serve Weft (daphne ASGI) with the in-process worker and beat (embedded deployment)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-worker", action="store_true", help="do not run the in-process worker")
        parser.add_argument("--no-beat", action="store_true", help="run the worker but not the schedule")
        parser.add_argument("--no-notices", action="store_true", help="do not listen to SM notices")

    def handle(self, host, port, no_worker, no_beat, no_notices, **opts):
        serve(host, port, worker=not no_worker, beat=not no_beat, notices=not no_notices, stdout=self.stdout)


def serve(
    host: str, port: int, *, worker: bool = True, beat: bool = True, notices: bool = True, stdout=None
) -> None:
    """Run daphne on ``host:port`` (blocking) with, when embedded, the in-process worker and (with
    ``notices`` and ``WEFT_NOTICES``) the SM-notice listeners."""
    from channels.routing import get_default_application
    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    from weft import inprocess

    # A process started in the background by a shell inherits SIGINT ignored, and Twisted then
    # leaves it so: restore Python's handler so that Ctrl-C (or kill -INT) always stops the server.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
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
        if listening:
            notice_listeners.stop()
        if worker and settings.EMBEDDED:
            # the process is ending: kill the tools its in-process tasks run (a sweep or discovery
            # would otherwise hold the interpreter's exit until its tool timed out)
            from fabric.collectors.tools import abort_all

            abort_all("Weft is stopping")
        inprocess.stop(wait=False)
