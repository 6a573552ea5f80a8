"""Celery beat with standbys (issue 25 §1): ``celery -A weft beat -S weft.beat:LeaderScheduler``.

Run one or more beat processes (on several hosts): each campaigns for the ``beat`` lease
(``core.leases``, PostgreSQL); the leader's scheduler sends the periodic tasks, the others tick
idle and take over within ``WEFT_LEASE_TTL_S`` (plus a fifth of it) of the leader's death. A leader
whose renewal fails (its database connection cut, another holder) stops sending before its lease
ends: every tick checks the local deadline first (no database access). The schedule itself is
Celery's ``PersistentScheduler`` (the shelve file of ``-s``/``CELERY_BEAT_SCHEDULE_FILENAME``, one
per host): a standby taking over sends what is due by its own schedule file, so the next run of
each entry comes at most one interval after the take-over.

Fencing: before each send the leader checks its fencing number against the lease row
(:func:`core.leases.check_fence`): a beat whose lease was taken over (a standby leads with a higher
number) sends nothing more, even while its local deadline has not passed yet, and one that cannot
read the row does not send either (a sweep or a pass missed is sent by the next leader; one sent
twice at once is what the lease is there to prevent).

Why not celery-redbeat (a Redis lock) or django-celery-beat (no leader election): docs/design.md
"Leaders with standbys". The embedded deployment (``weft.inprocess``) has its own in-process
timer and no lease: one process.
"""

from __future__ import annotations

import logging

from celery.beat import PersistentScheduler

log = logging.getLogger(__name__)

#: the lease role of the beat
ROLE = "beat"
#: how often a standby's tick looks at its lease (seconds; a local check)
STANDBY_TICK_S = 0.2


class LeaderScheduler(PersistentScheduler):
    """``PersistentScheduler`` whose ticks send only while this process holds the ``beat`` lease
    (see the module docstring). ``tick()`` returns seconds to sleep, as Celery's."""

    def __init__(self, *args, **kwargs) -> None:
        import django
        from django.apps import apps

        if not apps.ready:
            django.setup()
        from core.leases import LeaseKeeper

        self.leases = LeaseKeeper(
            [ROLE], on_elected=self._elected, on_lost=self._lost, name="weft-beat-leases"
        )
        self._campaigning = False
        self._closing = False  # close() gives the lease up: a stop, not a lost election
        super().__init__(*args, **kwargs)

    def _elected(self, role: str) -> None:
        log.info("beat: leading (lease %s, holder %s)", role, self.leases.holder)

    def _lost(self, role: str) -> None:
        if self._closing:  # SIGTERM/SIGINT: celery beat closes the scheduler on its way out
            log.info("beat: stopping: lease %s released, a standby takes over", role)
            return
        log.warning("beat: no longer leading (lease %s): standing by", role)

    def apply_entry(self, entry, producer=None) -> None:
        """Send ``entry`` (Celery's), only while the lease row still carries this leader's fencing
        number (module docstring); a stale leader logs one warning and stands by."""
        from django.db import DatabaseError, close_old_connections

        from core.leases import StaleLeader, check_fence

        fence = self.leases.fence(ROLE)
        try:
            if fence is None:
                raise StaleLeader(ROLE, 0, None)
            check_fence(fence)
        except StaleLeader as exc:
            log.warning("beat: %s not sent: %s", entry.name, exc)
            return
        except DatabaseError as exc:
            log.warning("beat: %s not sent: the lease could not be read (%s)", entry.name, exc)
            close_old_connections()
            return
        super().apply_entry(entry, producer=producer)

    def tick(self, *args, **kwargs) -> float:
        """One scheduler iteration while leading (Celery's), else a standby's short sleep. The
        first tick starts the campaign (``celery beat`` also builds a lazy scheduler for its
        banner, which must not campaign)."""
        if not self._campaigning:
            self._campaigning = True
            self.leases.start()
        if not self.leases.held(ROLE):
            return STANDBY_TICK_S
        delay = super().tick(*args, **kwargs)
        return min(delay, STANDBY_TICK_S * 5)  # wake up often enough to notice a lost lease

    def close(self) -> None:
        """Release the lease (a standby takes over at its next poll) and close the schedule; logs
        that the beat is stopping (not "standing by": this process is going away)."""
        self._closing = True
        try:
            if self._campaigning:
                self.leases.stop()
        finally:
            super().close()
