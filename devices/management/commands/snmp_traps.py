"""``manage.py snmp_traps``: the SNMP trap receiver in the foreground (``devices.services.traps``).

Run one or more (on several hosts, each under a supervisor, as ``listen_notices``): the one holding
the ``snmp_traps`` lease (``core.leases``) binds the socket and receives; the others wait and take
over within ``WEFT_LEASE_TTL_S`` of its death (the devices send their traps to both hosts, or to an
address that moves with the leader). A leader whose lease renewal fails closes its socket before
its lease ends. UDP 162 needs root or ``CAP_NET_BIND_SERVICE`` (or set ``WEFT_SNMP_TRAP_LISTEN``
to a high port and forward). SIGTERM or Ctrl-C stops it; the last line of stdout is a JSON
summary of what it received and dropped while leading (summed over its terms).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from core.leases import LeaseKeeper
from devices.services.traps import TrapReceiver, serve

#: the lease role of the trap receiver
ROLE = "snmp_traps"


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
        address = parse_listen(listen)
        totals = dict.fromkeys(("accepted", "dropped_unknown_community", "dropped_bad_v3",
                                "dropped_unknown_source", "dropped_malformed"), 0)  # fmt: skip
        end = None if seconds is None else time.monotonic() + seconds

        async def main():
            loop = asyncio.get_running_loop()
            stopped = asyncio.Event()  # SIGTERM, Ctrl-C or --seconds: the command ends
            changed = asyncio.Event()  # elected or lost: look at the lease again
            for sig in (signal.SIGTERM, signal.SIGINT):
                try:
                    loop.add_signal_handler(sig, stopped.set)
                except (NotImplementedError, RuntimeError):  # not the main thread
                    pass

            async def fence(term_stop: asyncio.Event) -> None:
                while not (stopped.is_set() or not keeper.held(ROLE)):
                    await asyncio.sleep(0.1)
                term_stop.set()

            keeper = LeaseKeeper(
                [ROLE],
                on_elected=lambda role: loop.call_soon_threadsafe(changed.set),
                on_lost=lambda role: loop.call_soon_threadsafe(changed.set),
                name="weft-traps-leases",
            ).start()
            self.stdout.write(f"receiving SNMP traps on {listen} while leading (SIGTERM or Ctrl-C stops)")
            self.stdout.flush()
            try:
                while not stopped.is_set():
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    if not keeper.held(ROLE):  # a standby: wait for the lease
                        changed.clear()
                        waits = [asyncio.ensure_future(e.wait()) for e in (changed, stopped)]
                        await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                        for w in waits:
                            w.cancel()
                        continue
                    term_stop = asyncio.Event()  # set when the command stops or the lease is lost

                    fencer = asyncio.ensure_future(fence(term_stop))
                    receiver = TrapReceiver(address)
                    try:
                        await serve(receiver, seconds=left, rescan_s=rescan, stop=term_stop)
                    finally:
                        fencer.cancel()
                        for key, value in receiver.stats().items():
                            if isinstance(value, int | float) and not isinstance(value, bool):
                                totals[key] = totals.get(key, 0) + value
            finally:
                await asyncio.get_running_loop().run_in_executor(None, keeper.stop)

        try:
            asyncio.run(main())
        except OSError as exc:
            raise CommandError(f"cannot listen on {listen}: {exc}") from exc
        self.stdout.write(json.dumps({"listen": listen, **totals}))
