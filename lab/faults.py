"""Demo fault injection: occasional link flaps and error bursts on a running lab fabric.

``FaultInjector(lab, interval)`` is a daemon thread the demo starts next to its lab. Every
``interval`` seconds (± 30 % jitter) it picks one fault:

* **link flap** (``lab.unlink``, then ``lab.relink`` after ``flap_s``): ibsim sends trap 128 to
  OpenSM, which forwards it to Weft's notice listener (``fabric.services.notices``): the link is
  gone within a second (``link.down`` → Critical alarm and mail, the cable Down on the map) and
  back within a second of the relink (``link.up`` clears it); the traffic player sends nothing
  through the pulled cable meanwhile (``lab.Lab.is_linked``);
* **error burst** (``lab.perf_set``): SymbolErrorCounter raised by ``burst`` and LinkDownedCounter
  by 1 on a switch port (added to the values ``perfquery`` reads first), so the next sweep's deltas raise ``port.symbol_errors`` and
  ``port.link_downed``; three later sweeps without new errors clear both (``WEFT_COUNTER_CLEAR_SWEEPS``).

* **HCA cable pull** (kind ``hca``, when ``hca_targets`` is given): the same unlink/relink of
  one HCA port of a host a job is running on (``hca_targets()`` names them: the demo passes
  the HCAs of its running jobs' hosts, never the SM's own): the job's page shows it
  ``degraded`` within a second, then ``requeued`` or ``replaced`` per its ``on_fault``, and its
  tenant's mail on the console (``scheduler.services.faults``). Chosen one time in
  ``1 / hca_share`` when there is a target.

Otherwise only links between two switches are flapped (a host link flap would also hide the
host's counters); the injector never takes down more than one link at a time and relinks
everything it unlinked on :meth:`stop`. Every fault is logged and kept in :attr:`history`. When the lab
itself is gone (``lab.Lab.failure``: its ibsim exited) the injector logs that in one line and
ends; other failures are logged with their traceback and it goes on.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class Fault:
    """One injected fault: ``kind`` (``flap``/``burst``), node name and port, start time (epoch s)."""

    kind: str
    node: str
    port: int
    at: float
    detail: str = ""


class FaultInjector(threading.Thread):
    """Daemon thread injecting faults into ``lab`` (a ``lab.Lab``) every ``interval`` seconds.

    ``targets``: ``[(node name, port), ...]`` to choose from; default: one end of each
    switch-to-switch link of the lab's netfile (``lab.net``). ``kinds`` restricts the fault types; ``seed`` makes the choice reproducible.
    ``hca_targets``: a callable returning ``[(HCA node name, port), ...]`` of hosts running jobs
    (asked at each fault; may be empty); ``hca_share``: the share of faults that pull one of them.
    """

    def __init__(self, lab, interval: float = 120.0, *, targets: list[tuple[str, int]] | None = None,
                 kinds: tuple[str, ...] = ("flap", "burst"), flap_s: float | None = None, burst: int = 500,
                 seed: int | None = None, hca_targets=None, hca_share: float = 0.5):  # fmt: skip
        super().__init__(name="weft-fault-injector", daemon=True)
        if interval <= 0:
            raise ValueError("interval must be > 0 seconds")
        self.lab = lab
        self.interval = float(interval)
        self.kinds = tuple(k for k in kinds if k in ("flap", "burst")) or ("flap",)
        self.flap_s = float(flap_s) if flap_s is not None else max(5.0, self.interval / 3)
        self.burst = int(burst)
        self.random = random.Random(seed)
        self.targets = list(targets) if targets is not None else self._default_targets()
        if not self.targets:
            raise ValueError("no switch ports to inject faults into: pass targets=[(node, port), ...]")
        self.hca_targets = hca_targets
        self.hca_share = float(hca_share)
        self.history: list[Fault] = []
        self._counters: dict[tuple[str, int], tuple[int, int]] = {}
        self._unlinked: list[tuple[str, int]] = []
        #: why the injector stopped by itself (the lab's ibsim exited), None while injecting
        self.stopped_because: str | None = None
        self._stop_event = threading.Event()

    def _default_targets(self) -> list[tuple[str, int]]:
        """One end of every switch-to-switch link of the lab's netfile (``lab.net``)."""
        net = getattr(self.lab, "net", None)
        if net is None:
            return []
        switches = {n.node_id for n in net.switches}
        return sorted(a for a, b in net.links if a[0] in switches and b[0] in switches)

    def run(self) -> None:
        while not self._stop_event.wait(self.interval * self.random.uniform(0.7, 1.3)):
            try:
                self.inject_once()
            except Exception:
                gone = self.lab_failure()
                if gone is not None:  # nothing to inject into any more: one line, no traceback
                    self.stopped_because = gone
                    log.warning("fault injector stopped: %s", gone)
                    return
                log.warning("fault injection failed", exc_info=True)

    def lab_failure(self) -> str | None:
        """Why the lab can take no more commands (``lab.Lab.failure``: stopped, its ibsim exited),
        None while it can (or when the lab object cannot tell)."""
        failure = getattr(self.lab, "failure", None)
        return failure() if failure is not None else None

    def inject_once(self) -> Fault:
        """Inject one fault now (also usable without starting the thread) and return it."""
        kind = self.random.choice(self.kinds)
        node, port = self.random.choice(self.targets)
        # (no draw without targets: a seeded injector without them picks as it always did)
        hcas = (
            self._hca_choices()
            if self.hca_targets is not None and self.random.random() < self.hca_share
            else []
        )
        if hcas:  # a cable of a host running a job: the job's fabric fails under it
            kind = "hca"
            node, port = self.random.choice(hcas)
        if kind in ("flap", "hca"):
            self.lab.unlink(node, port)
            self._unlinked.append((node, port))
            fault = Fault(kind, node, port, time.time(), f"relink after {self.flap_s:g} s")
            timer = threading.Timer(self.flap_s, self._relink, args=(node, port))
            timer.daemon = True
            timer.start()
        else:
            current = self._read_counters(node, port)
            symbols, downed = self._counters.get((node, port), (0, 0))
            symbols = max(symbols, current.get("SymbolErrorCounter", 0)) + self.burst
            downed = max(downed, current.get("LinkDownedCounter", 0)) + 1
            self._counters[(node, port)] = (symbols, downed)
            self.lab.perf_set(node, port, "SymbolErrorCounter", symbols)
            self.lab.perf_set(node, port, "LinkDownedCounter", downed)
            fault = Fault(
                "burst", node, port, time.time(), f"SymbolErrorCounter={symbols} LinkDownedCounter={downed}"
            )
        self.history.append(fault)
        log.info("fault injected: %s %s[%s] %s", fault.kind, node, port, fault.detail)
        return fault

    def _hca_choices(self) -> list[tuple[str, int]]:
        """``hca_targets()`` (empty without one, or when it fails: a flap or burst instead)."""
        if self.hca_targets is None or self._unlinked:
            return []
        try:
            return list(self.hca_targets())
        except Exception:
            log.warning("fault injector: could not list HCA targets", exc_info=True)
            return []

    def _read_counters(self, node: str, port: int) -> dict[str, int]:
        """The port's PortCounters as ``perfquery -G <guid> <port>`` prints them (``{name: value}``),
        so a burst adds to the current values instead of setting them lower (which telemetry would
        read as a counter reset). Empty when perfquery fails."""
        import re

        try:
            proc = self.lab.run(
                ["perfquery", "-G", self.lab.guid_of(node), str(port)], timeout=15, check=False
            )
        except Exception:
            return {}
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+):\.*(\d+)\s*$", proc.stdout, re.M)}

    def _relink(self, node: str, port: int) -> None:
        try:
            self.lab.relink(node, port)
        except Exception:
            gone = self.lab_failure()
            if gone is not None:  # the lab is gone: its cables with it (run() says so once)
                log.debug("relink of %s[%s] skipped: %s", node, port, gone)
            else:
                log.warning("relink of %s[%s] failed", node, port, exc_info=True)
        finally:
            if (node, port) in self._unlinked:
                self._unlinked.remove((node, port))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop injecting and relink every port this injector unlinked."""
        self._stop_event.set()
        for node, port in list(self._unlinked):
            self._relink(node, port)
        if self.is_alive():
            self.join(timeout)
