"""Stall watchdog: notice periodic work that stopped happening and say so with an alarm.

A beat task that is skipped (its lock held by a dead or wedged worker), a worker pool that is gone,
or a queue that is not consumed leaves no trace of its own: the sweeps or discoveries just stop.
The watchdog tasks (``fabric.tasks.discovery_watchdog_task``, ``telemetry.tasks.poller_watchdog_task``,
every ``WEFT_WATCHDOG_INTERVAL_S``) compare, per fabric, the end of the last run with a threshold and
write through ``events.services.record_events``:

* ``<stalled code>`` once when nothing finished for ``WEFT_STALL_INTERVALS`` intervals plus the
  longest a run may take (a run that ends in failure still counts: that is the ``*_failing`` alarm);
* ``<resumed code>`` (which clears it) once a run has finished again.

The clock starts at the last finished run, the fabric's creation, or the moment this process's
watchdog first looked (:func:`watching_since`), whichever is latest: a system started after a
stop (a restarted demo: the last sweep is the previous run's, hours old) gets its first intervals
before anything is called a stall (issue 26 §4: "poller stalled" at once on a restarted demo). A
real stall is then raised at most one threshold after the start.

Whether a stall is open is read from the fabric's last event of the two codes, so the watchdog keeps
no state of its own and several watchdogs agree. The watchdog runs in a worker too: with no worker
at all it is silent (``/metrics`` still shows the age of the last sweep to an outside monitor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from events.models import Event
from events.services import EventSpec, record_events

from ..choices import DiscoverySource
from ..models import Discovery, Fabric


@dataclass(frozen=True)
class StallCheck:
    """The outcome for one fabric: ``stalled`` (nothing finished for ``age_s`` > ``threshold_s``),
    the event code written now ("" for none)."""

    fabric: str
    stalled: bool
    age_s: float
    threshold_s: float
    event: str = ""

    def as_dict(self) -> dict:
        """JSON summary (the watchdog task's result)."""
        return {
            "fabric": self.fabric,
            "stalled": self.stalled,
            "age_s": round(self.age_s, 1),
            "threshold_s": round(self.threshold_s, 1),
            "event": self.event,
        }


_WATCHING_SINCE: datetime | None = None


def watching_since() -> datetime:
    """When this process's watchdog first checked (set on the first call; UTC). Nothing is
    expected of the periodic work before then."""
    global _WATCHING_SINCE
    if _WATCHING_SINCE is None:
        _WATCHING_SINCE = timezone.now()
    return _WATCHING_SINCE


def stall_intervals() -> int:
    """``settings.WEFT_STALL_INTERVALS`` (at least 1)."""
    return settings.WEFT_STALL_INTERVALS


def check_stalls(
    fabrics: Iterable[Fabric],
    *,
    last_finished: Callable[[Fabric], datetime | None],
    threshold_s: Callable[[Fabric], float],
    stalled_code: str,
    resumed_code: str,
    what: str,
    now: datetime | None = None,
) -> list[StallCheck]:
    """Check ``fabrics`` and write the stall events (see the module docstring).

    ``last_finished(fabric)``: when the last run ended (None: never; the fabric's creation counts
    then); ``threshold_s(fabric)``: seconds without a finished run that make a stall; ``what``: the
    work in words ("counter sweep", "live discovery") for the messages. Returns one
    :class:`StallCheck` per fabric.
    """
    now = now or timezone.now()
    started = watching_since()
    out = []
    for fabric in fabrics:
        last = last_finished(fabric)
        since = max(last or fabric.created, fabric.created, started)
        age = (now - since).total_seconds()
        limit = threshold_s(fabric)
        stalled = age > limit
        with transaction.atomic():
            locked = Fabric.objects.select_for_update().get(pk=fabric.pk)  # one watchdog writes at a time
            last_code = (
                Event.objects.filter(fabric=locked, code__in=(stalled_code, resumed_code))
                .order_by("-at", "-id")
                .values_list("code", flat=True)
                .first()
            )
            is_open = last_code == stalled_code
            spec = None
            where = {"object_type": "fabric", "object_key": locked.name, "object_repr": locked.name}
            if stalled and not is_open:
                ended = f"the last one ended {last:%Y-%m-%d %H:%M:%S} UTC" if last else "none ever ran"
                spec = EventSpec(
                    code=stalled_code,
                    message=(
                        f"No {what} of fabric {locked.name} for {age:.0f} s (limit {limit:.0f} s: "
                        f"{stall_intervals()} intervals plus the longest a run may take); {ended}. "
                        "Are the Celery worker and beat running, and is Redis reachable?"
                    ),
                    details={"age_s": round(age, 1), "threshold_s": limit, "last": last and last.isoformat()},
                    **where,
                )
            elif not stalled and is_open:
                spec = EventSpec(
                    code=resumed_code,
                    message=f"{what.capitalize()}s of fabric {locked.name} run again (last ended {age:.0f} s ago)",
                    details={"age_s": round(age, 1), "last": last and last.isoformat()},
                    **where,
                )
            if spec is not None:
                record_events(locked, [spec], at=now)
        out.append(StallCheck(fabric.name, stalled, age, limit, spec.code if spec else ""))
    return out


def finished_at(started: datetime | None, duration_s: float | None) -> datetime | None:
    """When a run that started at ``started`` and took ``duration_s`` seconds ended (None: unknown)."""
    if started is None:
        return None
    return started + timedelta(seconds=duration_s or 0.0)


def check_discovery(now: datetime | None = None) -> list[StallCheck]:
    """Stall check of live discovery: every live-discoverable fabric (``tools.is_live``) must have
    finished a live discovery within ``WEFT_STALL_INTERVALS`` × ``WEFT_DISCOVERY_INTERVAL_S`` plus its
    ``discovery_timeout_s`` and the ``sminfo`` after it (at most ``WEFT_TOOL_TIMEOUT_S``).
    Writes ``system.discovery_stalled``/``system.discovery_resumed``."""
    from ..collectors.tools import is_live

    interval = float(settings.WEFT_DISCOVERY_INTERVAL_S)
    tool = float(settings.WEFT_TOOL_TIMEOUT_S)

    def last(fabric: Fabric) -> datetime | None:
        row = (
            Discovery.objects.filter(fabric=fabric, source=DiscoverySource.LIVE)
            .order_by("-started", "-id")
            .values_list("started", "duration_s")
            .first()
        )
        return finished_at(*row) if row else None

    fabrics = [f for f in Fabric.objects.filter(discovery_enabled=True).order_by("name") if is_live(f)]
    return check_stalls(
        fabrics,
        last_finished=last,
        threshold_s=lambda f: stall_intervals() * interval
        + float(f.discovery_timeout_s)
        + min(tool, f.discovery_timeout_s),
        stalled_code="system.discovery_stalled",
        resumed_code="system.discovery_resumed",
        what="live discovery",
        now=now,
    )
