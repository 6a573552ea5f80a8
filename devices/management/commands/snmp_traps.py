"""``manage.py snmp_traps``: the SNMP trap receiver in the foreground (``devices.services.traps``).

Run exactly one, under a supervisor (as ``listen_notices``); UDP 162 needs root or
``CAP_NET_BIND_SERVICE`` (or set ``WEFT_SNMP_TRAP_LISTEN`` to a high port and forward). SIGTERM or
Ctrl-C stops it; the last line of stdout is a JSON summary of what it received and dropped.
"""

from __future__ import annotations

import asyncio
import json
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from devices.services.traps import TrapReceiver, serve


def parse_listen(text: str) -> tuple[str, int]:
    """``"host:port"`` → ``(host, port)`` (IPv4 or a name; port 1-65535).

    Raises:
        CommandError: not ``host:port``.
    """
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CommandError(f"listen address {text!r}: expected HOST:PORT, e.g. 0.0.0.0:162")
    return host, int(port)


class Command(BaseCommand):
    help = "Receive SNMP traps from the managed devices until stopped (production; README)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--listen", default=settings.WEFT_SNMP_TRAP_LISTEN, help="HOST:PORT (WEFT_SNMP_TRAP_LISTEN)"
        )
        parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
        parser.add_argument("--rescan", type=float, default=30.0, help="re-read the devices every N seconds")

    def handle(self, *args, listen, seconds, rescan, **opts):
        receiver = TrapReceiver(parse_listen(listen))

        async def main():
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, stop.set)
                except (NotImplementedError, RuntimeError):  # not the main thread
                    pass
            self.stdout.write(f"receiving SNMP traps on {listen} (SIGTERM or Ctrl-C stops)")
            self.stdout.flush()
            await serve(receiver, seconds=seconds, rescan_s=rescan, stop=stop)

        try:
            asyncio.run(main())
        except OSError as exc:
            raise CommandError(f"cannot listen on {listen}: {exc}") from exc
        self.stdout.write(json.dumps({"listen": listen, **receiver.stats()}))
