"""Demo traffic: a synthetic load pattern played into a lab fabric's port counters.

The lab (ibsim) carries no data traffic, so the demo writes counters with ibsim's console
``PerformanceSet`` (``lab.Lab.perf_set``) the way real traffic would move them; the poller then
reads them with the real tools and the heatmap moves.

Pattern (pure, :func:`link_load` and :func:`traffic_pattern`):

* background: every link direction carries a fixed 2-10 % of its data rate;
* hot spots: ``hot_spots`` switch-to-switch links (chosen with ``seed``, moved every
  ``hot_spot_period_s``) run at ~95 % one way with a congestion index oscillating 0.5-0.9
  (an incast: the transmitting port waits for credits);
* an all-reduce-like wave: a bump of load travels across the leaves (sorted by name), one full
  pass every ``wave_period_s``; the leaf under the wave runs its up-links near 85 % both ways and
  the spine ports sending down to it see congestion up to 0.5.

Counters written (IBTA Vol 1 ch. 16.1): ``PortCountersExtended.PortXmitData``/``PortRcvData``
(64-bit, 4-byte words: words = bytes / 4), ``PortCountersExtended.PortXmitPkts``/``PortRcvPkts``
(packets: the bytes over ``packet_bytes``, default :data:`PACKET_BYTES`, a full 4 KiB-MTU packet
with its headers, so 4x HDR at line rate is ~6 million packets/s as on a real link doing bulk
RDMA) and ``PortCounters.PortXmitWait`` (32-bit ticks; ``ticks_per_s_full`` ticks per second is
a congestion index of 1, see ``telemetry.semantics``). PortXmitWait is a 32-bit counter that
stops at 2**32-1; the generator wraps it to 0 before that, which the poller reports as one counter
reset (no rate for that one interval on that port) instead of a saturated counter that would
freeze the demo.

Never above the line rate (issue 26 §4: 35.6 GB/s was shown on a 4x HDR port): each tick adds
the traffic of the time that really passed since the previous one, at most one ``interval``
(:meth:`TrafficPlayer.tick`). The demo runs the server, the worker and the sweeps in one process:
when the player's thread is held up (the GIL, a loaded machine), it used to catch up by playing
every missed tick back to back, each with a full interval's bytes; a sweep that had read a port
before the stall and read it again after the burst saw the stall's bytes in a shorter time, up to
1.5x the line rate. Counters move in steps of one tick, so a sweep's interval of ``W`` seconds can
still carry the traffic of ``W + interval``: with ``poll_interval_s`` (``P``) the player caps
every load at ``1 - interval / P`` of the link, so no sweep interval of ``P - interval`` seconds
or more can measure more than the line rate.

A cable that is down carries nothing: ``down(link index)`` (the player asks the lab,
``lab.Lab.is_linked``) stops both directions of that link, its counters stay where they are and
resume from there when it is back.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

log = logging.getLogger(__name__)

#: Tier numbers as in ``fabric.choices.Tier`` (kept here so the generator imports no Django).
LEAF, SPINE, CORE = 1, 2, 3
XMIT_WAIT_WRAP = 2**32 - 2**28  # wrap before the 32-bit counter saturates
#: Default ticks per second of PortXmitWait that count as fully congested (index 1.0).
DEFAULT_TICKS_PER_S_FULL = 1.0e6  # one tick per blocked microsecond (telemetry.semantics)
#: Bytes per packet as PortXmitData counts them: a 4096-byte MTU payload + LRH (8), BTH (12),
#: ICRC (4) and VCRC (2) rounded to words (IBTA Vol 1 ch. 7): bulk RDMA traffic is full-MTU packets.
PACKET_BYTES = 4096 + 28


@dataclass(frozen=True)
class LinkEnd:
    """One end of a link: a node (as the lab names it: id, description or GUID), port, tier, switch?"""

    node: str
    port: int
    tier: int
    switch: bool = True


@dataclass(frozen=True)
class TrafficLink:
    """A cable between ``a`` and ``b`` with its data rate in bytes/s (4x HDR = 25e9)."""

    a: LinkEnd
    b: LinkEnd
    rate_bytes_per_s: float


class PerfStep(NamedTuple):
    """One ``PerformanceSet``: absolute counter ``value`` of ``field`` on ``node`` ``port``."""

    node: str
    port: int
    field: str
    value: int


class Load(NamedTuple):
    """Load of one link direction at an instant: utilisation 0..1 and congestion index 0..1."""

    utilisation: float
    congestion: float


#: the least load of a port a running job's traffic crosses (``traffic_pattern``'s ``busy``):
#: busy, but its congestion below the ``port.congestion`` rule's default threshold (0.5), or every
#: job of the demo would be degraded ``path_congested`` by its own traffic
BUSY = Load(0.92, 0.45)


def _hot_links(links: Sequence[TrafficLink], t: float, seed: int, count: int, period_s: float) -> set[int]:
    candidates = [i for i, link in enumerate(links) if link.a.switch and link.b.switch] or list(
        range(len(links))
    )
    epoch = int(t // period_s) if period_s > 0 else 0
    rng = random.Random(f"{seed}:{epoch}")
    return set(rng.sample(candidates, min(count, len(candidates))))


def link_load(
    links: Sequence[TrafficLink],
    t: float,
    *,
    seed: int = 0,
    hot_spots: int = 3,
    hot_spot_period_s: float = 300.0,
    wave_period_s: float = 40.0,
) -> dict[tuple[int, str], Load]:
    """Return the load of each link direction at time ``t`` (seconds from the start).

    Keys are ``(link index, "ab" | "ba")`` (``"ab"``: ``a`` transmits to ``b``). Deterministic for
    a given ``seed``. See the module docstring for the pattern.
    """
    rng = random.Random(seed)
    background = [(rng.uniform(0.02, 0.1), rng.uniform(0.02, 0.1)) for _ in links]
    hot = _hot_links(links, t, seed, hot_spots, hot_spot_period_s)
    leaves = sorted({e.node for link in links for e in (link.a, link.b) if e.switch and e.tier == LEAF})
    position = (t / wave_period_s) * len(leaves) if leaves and wave_period_s > 0 else 0.0

    def wave(node: str) -> float:
        if node not in leaves:
            return 0.0
        d = abs(leaves.index(node) - position % len(leaves))
        d = min(d, len(leaves) - d)
        return math.exp(-(d**2) / (2 * 0.6**2))

    loads: dict[tuple[int, str], Load] = {}
    for i, link in enumerate(links):
        for direction, src, dst in (("ab", link.a, link.b), ("ba", link.b, link.a)):
            util = background[i][0 if direction == "ab" else 1]
            cong = 0.0
            # The wave: a leaf's up-links (leaf -> spine) and the spine's down-links to that leaf.
            w = max(
                wave(src.node) if dst.tier > src.tier else 0.0, wave(dst.node) if src.tier > dst.tier else 0.0
            )
            if w > 0.01:
                util = max(util, 0.85 * w)
                if src.tier > dst.tier:  # spine sending down into the busy leaf: incast waits
                    cong = max(cong, 0.5 * w)
            if i in hot and direction == "ab":
                util = max(util, 0.95)
                cong = max(cong, 0.7 + 0.2 * math.sin(2 * math.pi * t / 17.0 + i))
            loads[(i, direction)] = Load(min(util, 1.0), min(max(cong, 0.0), 1.0))
    return loads


def traffic_pattern(
    links: Sequence[TrafficLink],
    interval_s: float = 1.0,
    *,
    seed: int = 0,
    hot_spots: int = 3,
    hot_spot_period_s: float = 300.0,
    wave_period_s: float = 40.0,
    ticks_per_s_full: float = DEFAULT_TICKS_PER_S_FULL,
    packet_bytes: float = PACKET_BYTES,
    down: Callable[[int], bool] | None = None,
    busy: Callable[[], Iterable[tuple[str, int]]] | None = None,
    elapsed: Callable[[], float] | None = None,
    max_utilisation: float = 1.0,
) -> Iterator[list[PerfStep]]:
    """Yield, every ``interval_s`` of pattern time, the ``PerformanceSet`` steps of that tick.

    ``elapsed``: called every tick, the seconds of traffic that tick carries (the player: the real
    time since its previous tick, at most ``interval_s``); default ``interval_s``.
    ``max_utilisation``: no link direction carries more than this share of its data rate.

    ``busy``: called every tick, the egress ports ``(node, port)`` (as :class:`LinkEnd` names
    them) that carry a running job's traffic now (the demo: the job→links index's busiest
    ports); each sends at least :data:`BUSY` (utilisation, congestion), so the hot spots the
    admin sees are those a job crosses, and its page, the heatmap and the map name it.

    Each step sets an absolute counter value (counters only rise, except the PortXmitWait wrap
    described in the module docstring): data in words, packets (data bytes / ``packet_bytes``),
    PortXmitWait. Only switch ports are written (the heatmap's cells); a link for which
    ``down(index)`` is true at a tick gets no step and its counters do not move. Infinite; the
    first tick is ``t = interval_s``.
    """
    if interval_s <= 0:
        raise ValueError(f"interval_s must be > 0, not {interval_s}")
    counters: dict[tuple[str, int, str], float] = {}
    egress: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for i, link in enumerate(links):
        egress.setdefault((link.a.node, link.a.port), []).append((i, "ab"))
        egress.setdefault((link.b.node, link.b.port), []).append((i, "ba"))
    t = 0.0
    while True:
        dt = interval_s if elapsed is None else max(0.0, float(elapsed()))
        t += dt
        loads = link_load(
            links,
            t,
            seed=seed,
            hot_spots=hot_spots,
            hot_spot_period_s=hot_spot_period_s,
            wave_period_s=wave_period_s,
        )
        for key in busy() if busy is not None else ():
            for i, direction in egress.get(tuple(key), ()):
                u, c = loads[(i, direction)]
                loads[(i, direction)] = Load(max(u, BUSY.utilisation), max(c, BUSY.congestion))
        steps: list[PerfStep] = []
        for i, link in enumerate(links):
            if down is not None and down(i):
                continue
            for direction, src, dst in (("ab", link.a, link.b), ("ba", link.b, link.a)):
                load = loads[(i, direction)]
                octets = min(load.utilisation, max_utilisation) * link.rate_bytes_per_s * dt
                words, packets = octets / 4, octets / packet_bytes
                if src.switch:
                    steps.append(_bump(counters, src, "PortCountersExtended.PortXmitData", words))
                    steps.append(_bump(counters, src, "PortCountersExtended.PortXmitPkts", packets))
                    wait = load.congestion * ticks_per_s_full * dt
                    steps.append(_bump(counters, src, "PortXmitWait", wait, wrap=XMIT_WAIT_WRAP))
                if dst.switch:
                    steps.append(_bump(counters, dst, "PortCountersExtended.PortRcvData", words))
                    steps.append(_bump(counters, dst, "PortCountersExtended.PortRcvPkts", packets))
        yield steps


def _bump(
    counters: dict[tuple[str, int, str], float],
    end: LinkEnd,
    field: str,
    amount: float,
    wrap: int | None = None,
) -> PerfStep:
    key = (end.node, end.port, field)
    value = counters.get(key, 0.0) + amount
    if wrap is not None and value >= wrap:
        value = amount
    counters[key] = value
    return PerfStep(end.node, end.port, field, int(value))


def fabric_links(fabric: Any) -> list[TrafficLink]:
    """The links of a ``fabric.Fabric`` with at least one switch end, as :class:`TrafficLink` (GUID names)."""
    from fabric.choices import NodeType
    from fabric.models import Link

    out = []
    for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node"):
        ends = []
        for port in (link.port_a, link.port_b):
            node = port.node
            ends.append(
                LinkEnd(node.node_guid, port.port_num, int(node.tier), node.node_type == NodeType.SWITCH)
            )
        if not (ends[0].switch or ends[1].switch):
            continue
        rate = (link.rate_gbps or 200.0) * 1e9 / 8
        out.append(TrafficLink(ends[0], ends[1], rate))
    return out


class TrafficPlayer(threading.Thread):
    """Plays :func:`traffic_pattern` into a running lab every ``interval`` seconds (daemon thread).

    ``lab`` is a ``lab.Lab`` (``perf_set``, and ``is_linked`` when it has it: a pulled cable gets
    no traffic), ``fabric`` the ``fabric.Fabric`` whose stored topology (after discovery) gives
    the links and tiers. ``start()`` to play, ``stop()`` to end. Console errors are counted in
    ``errors`` and logged (the first 5, then every 100th); the player goes on, unless the lab
    itself is gone (``lab.Lab.failure``: stopped, or its ibsim exited): then it logs that once
    and ends (``stopped_because``). ``last_tick_s`` is how long the last tick's PerformanceSet
    commands took.

    Counters move in steps of one tick, so a sweep sees one tick more or less per poll interval:
    keep ``interval`` at a quarter of the poll interval or less (the default 0.5 s suits polls of
    2 s and more) or rates jitter by ``interval / poll interval``. Each tick carries the real time
    since the previous one, at most ``interval`` (a held-up player plays no burst of missed ticks,
    see the module docstring); with ``poll_interval_s`` (the sweeps' interval) every load is capped
    at ``1 - interval / poll_interval_s`` so no sweep measures more than the line rate.
    ``clock``: the monotonic clock, seconds (tests pass their own).
    """

    def __init__(
        self,
        lab: Any,
        fabric: Any,
        interval: float = 0.5,
        *,
        seed: int = 0,
        poll_interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        **pattern: Any,
    ):
        super().__init__(name=f"weft-traffic-{getattr(fabric, 'name', fabric)}", daemon=True)
        self.lab = lab
        self.interval = float(interval)
        self.clock = clock
        self.links = fabric_links(fabric)
        ticks = pattern.pop("ticks_per_s_full", None) or _ticks_per_s_full()
        if poll_interval_s:
            pattern.setdefault("max_utilisation", max(0.0, 1.0 - self.interval / float(poll_interval_s)))
        self._last_tick: float | None = None
        self.pattern = traffic_pattern(
            self.links,
            self.interval,
            seed=seed,
            ticks_per_s_full=ticks,
            down=self.link_down,
            elapsed=self._elapsed,
            **pattern,
        )
        self.ticks = 0
        self.errors = 0
        self.last_tick_s = 0.0
        #: why the player stopped by itself (the lab's ibsim exited), None while playing
        self.stopped_because: str | None = None
        self._stop_event = threading.Event()

    def link_down(self, index: int) -> bool:
        """True when the cable of ``self.links[index]`` is pulled in the lab now (no traffic)."""
        is_linked = getattr(self.lab, "is_linked", None)
        if is_linked is None:
            return False
        end = self.links[index].a
        try:
            return not is_linked(end.node, end.port)
        except Exception:  # a node the lab does not know: treat as up, as before
            return False

    def _elapsed(self) -> float:
        """Seconds of traffic the tick being played carries: the time since the previous tick, at
        most ``interval`` (the first tick: ``interval``)."""
        now = self.clock()
        last, self._last_tick = self._last_tick, now
        if last is None:
            return self.interval
        return min(max(0.0, now - last), self.interval)

    def tick(self) -> bool:
        """Play one tick into the lab; False when the player must stop (asked to, or the lab is gone)."""
        began = self.clock()
        for step in next(self.pattern):
            if self._stop_event.is_set():
                return False
            try:
                self.lab.perf_set(step.node, step.port, step.field, step.value)
            except Exception as exc:  # a vanished node: log and go on; a dead lab: stop
                self.errors += 1
                gone = self.lab_failure()
                if gone is not None:
                    self.stopped_because = gone
                    log.warning("traffic player stopped: %s", gone)
                    return False
                if self.errors <= 5 or self.errors % 100 == 0:
                    log.warning("traffic: %s: %s", step, exc)
        self.ticks += 1
        self.last_tick_s = self.clock() - began
        return True

    def run(self) -> None:
        next_at = self.clock()
        while not self._stop_event.is_set():
            if not self.tick():
                return
            # behind (a slow tick, the thread held up): the next tick now, not a burst of the missed ones
            next_at = max(next_at + self.interval, self.clock())
            self._stop_event.wait(max(0.0, next_at - self.clock()))

    def lab_failure(self) -> str | None:
        """Why the lab can take no more commands (``lab.Lab.failure``: stopped, its ibsim exited),
        None while it can (or when the lab object cannot tell)."""
        failure = getattr(self.lab, "failure", None)
        return failure() if failure is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop playing and wait for the thread."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout)


def _ticks_per_s_full() -> float:
    """Ticks/s of PortXmitWait that the telemetry congestion index counts as 1.0 (1 s / tick)."""
    from django.conf import settings

    return 1e9 / settings.WEFT_XMIT_WAIT_TICK_NS
