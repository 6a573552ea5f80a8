"""Leadership leases for the singleton roles (issue 25 §1): several instances, one leader.

A role (``beat``, ``notices:<fabric id>``, ``snmp_traps``) may run as several processes on several
hosts; the one holding the role's row in ``core_lease`` leads, the others wait. Why a lease row in
PostgreSQL rather than the Celery ecosystem's beat locks (celery-redbeat's Redis lock) or an
advisory lock: ``docs/design.md`` "Leaders with standbys".

* :meth:`Lease.acquire` takes or renews the role in **one** statement
  (``INSERT … ON CONFLICT (role) DO UPDATE … WHERE expires_at < now OR holder = me RETURNING``):
  atomic in PostgreSQL (the row lock) and SQLite (one writer), so two candidates can never both
  win. The expiry is computed by the database's clock (PostgreSQL ``clock_timestamp()``), not the
  hosts'. A take-over by another holder increments ``fencing``.
* **Fencing on the leader's side**: the leader notes ``time.monotonic()`` *before* sending the
  statement; the database's ``expires_at`` is at least ``ttl`` after that instant, so the local
  deadline ``t0 + ttl - margin`` passes before the lease ends, whatever the round trip took. A
  leader acts only while :meth:`Lease.held` (a local check, no database): it stops as soon as a
  renewal finds another holder, and in any case when its local deadline passes; a renewal that
  fails with a database error is retried at once (a transient lock, a reconnection) until then (a
  partitioned leader whose renewals hang or fail stops ``margin`` seconds before a standby may
  take over).
* :class:`LeaseKeeper` runs the renewals (every ``ttl/3`` while leading, every ``poll`` while
  waiting) in a thread, and a second thread that calls ``on_lost(role)`` as soon as a held role is
  no longer :meth:`~Lease.held`, so the role's work stops even when the renewing thread hangs in
  the database.
* **Fencing on the database's side**: a write a leader makes on behalf of its role carries the
  fencing number it was elected with (``Fence(role, number)``, :meth:`LeaseKeeper.fence`) and
  calls :func:`check_fence` inside its transaction: refused (:class:`StaleLeader`) when the
  role's lease has since been taken over (a higher number), whatever the old leader's clock and
  threads believe. The check share-locks the lease row until the write commits, so a take-over
  waits for a write that passed it (and the write is ordered before it).
* The row is the role's heartbeat: :func:`role_states` (``/metrics`` ``weft_role_up``, the
  ``system.role_down`` alarm of ``events.services.roles``).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

log = logging.getLogger(__name__)


class StaleLeader(RuntimeError):
    """A write on behalf of ``role`` by a leader elected with fencing number ``fencing`` was
    refused: the lease is at ``current`` now (taken over), or gone (None)."""

    def __init__(self, role: str, fencing: int, current: int | None) -> None:
        self.role, self.fencing, self.current = role, fencing, current
        super().__init__(
            f"lease {role}: a write of the leader elected with fencing {fencing} was refused "
            f"(the lease is at {current if current is not None else 'no holder'}: taken over)"
        )


@dataclass(frozen=True)
class Fence:
    """The fencing number ``number`` a leader of ``role`` was elected with (``core_lease.fencing``)."""

    role: str
    number: int


def check_fence(fence: Fence | None) -> None:
    """Refuse a leader's write whose lease was taken over since it was elected.

    Call it inside the writer's transaction, before its writes (``fence`` None: not a leader's
    write, nothing checked). On PostgreSQL the lease row is read ``FOR SHARE``: a take-over
    (its UPDATE of the row) waits until this transaction ends, so no write passes the check after
    a take-over committed. Keep such transactions short (a renewal of the same lease waits too).

    Raises:
        StaleLeader: the role's lease is at another fencing number (a newer leader), or has no row.
    """
    if fence is None:
        return
    lock = " FOR SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT fencing FROM core_lease WHERE role = %s{lock}", [fence.role])
        row = cursor.fetchone()
    current = int(row[0]) if row else None
    if current != fence.number:
        raise StaleLeader(fence.role, fence.number, current)


def holder_id() -> str:
    """``host:pid:random``: one candidate's identity (a restarted process is a new holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def _now_sql(ttl_s: float) -> tuple[str, str, list, list]:
    """(now, now + ttl) as SQL with their parameters: the database's clock on PostgreSQL, this
    host's on SQLite (one host: the embedded deployment)."""
    if connection.vendor == "postgresql":
        return "clock_timestamp()", "clock_timestamp() + %s * interval '1 second'", [], [ttl_s]
    now = timezone.now()
    return "%s", "%s", [now], [now + timedelta(seconds=ttl_s)]


class Lease:
    """One candidate's lease on ``role`` (see the module docstring).

    Args:
        role: the role's name (≤ 200 characters), e.g. ``"beat"``, ``"notices:3"``.
        ttl_s: how long a take or renewal holds (seconds; default ``WEFT_LEASE_TTL_S``).
        holder: this candidate's id (default :func:`holder_id`).

    Not thread-safe: one thread calls :meth:`acquire`/:meth:`release`; :meth:`held` from any.
    """

    def __init__(self, role: str, ttl_s: float | None = None, holder: str | None = None) -> None:
        self.role = role
        self.ttl_s = float(ttl_s or settings.WEFT_LEASE_TTL_S)
        self.margin_s = self.ttl_s / 5  # time to stop acting, and clock-rate drift
        self.holder = holder or holder_id()
        self.fencing: int | None = None
        self.renew_failed = False  # the last attempt met a database error
        self._deadline = 0.0  # time.monotonic() until which this candidate may act

    def held(self) -> bool:
        """True while this candidate leads: its last take/renewal succeeded and its local
        deadline has not passed (no database access)."""
        return time.monotonic() < self._deadline

    def remaining(self) -> float:
        """Seconds left before the local deadline (0 when not held)."""
        return max(0.0, self._deadline - time.monotonic())

    def acquire(self) -> bool:
        """Take the role if its lease lapsed, or renew it if this candidate holds it; returns
        whether it leads now. A database error (logged as a warning, the connection closed so the
        next attempt reconnects) changes nothing: the row stays this holder's until its expiry, so
        the leader goes on until its local deadline and stops then unless a retry succeeds
        (``renew_failed`` is set: :class:`LeaseKeeper` retries at its standby poll)."""
        t0 = time.monotonic()
        now, until, now_params, until_params = _now_sql(self.ttl_s)
        table = "core_lease"
        sql = (
            f"INSERT INTO {table} (role, holder, fencing, acquired_at, renewed_at, expires_at) "
            f"VALUES (%s, %s, 1, {now}, {now}, {until}) "
            f"ON CONFLICT (role) DO UPDATE SET holder = excluded.holder, "
            f"fencing = CASE WHEN {table}.holder = excluded.holder THEN {table}.fencing "
            f"ELSE {table}.fencing + 1 END, "
            f"acquired_at = CASE WHEN {table}.holder = excluded.holder THEN {table}.acquired_at "
            f"ELSE excluded.acquired_at END, "
            f"renewed_at = excluded.renewed_at, expires_at = excluded.expires_at "
            f"WHERE {table}.holder = excluded.holder OR {table}.expires_at < excluded.renewed_at "
            f"RETURNING fencing"
        )
        params = [self.role, self.holder, *now_params, *now_params, *until_params]
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                row = cursor.fetchone()
        except Exception as exc:  # the database is unreachable, locked, or our connection was cut
            log.warning(
                "lease %s: %s failed (%s); %.1f s left", self.role,
                "renewal" if self.held() else "take", exc, self.remaining(),
            )  # fmt: skip
            self.renew_failed = True
            try:
                connection.close()
            except Exception:
                pass
            return self.held()
        self.renew_failed = False
        if row is None:  # another holder's lease is still running
            self._deadline = 0.0
            return False
        if self.fencing != row[0]:
            log.info("lease %s: taken by %s (fencing %s)", self.role, self.holder, row[0])
        self.fencing = int(row[0])
        self._deadline = t0 + self.ttl_s - self.margin_s
        return True

    def release(self) -> None:
        """Give the role up at once (a clean stop): a standby takes over at its next poll."""
        self._deadline = 0.0
        now, _, now_params, _ = _now_sql(0)
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE core_lease SET expires_at = {now} WHERE role = %s AND holder = %s",
                    [*now_params, self.role, self.holder],
                )
        except Exception as exc:
            log.warning("lease %s: release failed (%s); it lapses by itself", self.role, exc)


class LeaseKeeper:
    """Campaigns for a set of roles in the background (see the module docstring).

    Args:
        roles: the roles wanted at start (more or fewer with :meth:`want`).
        on_elected: ``on_elected(role)``, called from the renewing thread when a role is taken.
        on_lost: ``on_lost(role)``, called from the fencing thread when a held role is no longer
            held (another holder, local deadline passed) or is given up.
        ttl_s: the leases' time to live (default ``WEFT_LEASE_TTL_S``).
        poll_s: how often a waiting candidate tries to take over (default ``ttl_s / 5``).
    """

    def __init__(
        self,
        roles: Iterable[str] = (),
        *,
        on_elected: Callable[[str], None] | None = None,
        on_lost: Callable[[str], None] | None = None,
        ttl_s: float | None = None,
        poll_s: float | None = None,
        name: str = "weft-leases",
    ) -> None:
        self.ttl_s = float(ttl_s or settings.WEFT_LEASE_TTL_S)
        self.poll_s = float(poll_s or self.ttl_s / 5)
        self.holder = holder_id()
        self.on_elected = on_elected or (lambda role: None)
        self.on_lost = on_lost or (lambda role: None)
        self._lock = threading.Lock()
        self._leases: dict[str, Lease] = {}
        self._leading: set[str] = set()  # roles reported to on_elected and not yet to on_lost
        self._stop = threading.Event()
        self._wake = threading.Event()
        self.want(roles)
        self._renewer = threading.Thread(target=self._renew_loop, name=f"{name}-renew", daemon=True)
        self._fence = threading.Thread(target=self._fence_loop, name=f"{name}-fence", daemon=True)

    def start(self) -> LeaseKeeper:
        """Start both threads; returns self."""
        self._renewer.start()
        self._fence.start()
        return self

    def want(self, roles: Iterable[str], *, now: bool = False) -> None:
        """Campaign for exactly ``roles`` from now on (roles dropped are released). ``now``: also
        take or renew each of them at once, in the caller's thread (with its own database
        connection), before returning (``on_elected`` is called for a role taken)."""
        roles = set(roles)
        with self._lock:
            for role in roles - set(self._leases):
                self._leases[role] = Lease(role, self.ttl_s, self.holder)
            dropped = [self._leases.pop(r) for r in set(self._leases) - roles]
            wanted = [self._leases[r] for r in sorted(roles)]
        for lease in dropped:
            self._give_up(lease)
        if now:
            for lease in wanted:
                self._try(lease)
        if roles:
            self._wake.set()

    def _try(self, lease: Lease) -> None:
        if lease.acquire():
            with self._lock:
                fresh = lease.role not in self._leading and lease.role in self._leases
                if fresh:
                    self._leading.add(lease.role)
            if fresh:
                self._call(self.on_elected, lease.role)

    def held(self, role: str) -> bool:
        """True while this process leads ``role`` (local check)."""
        lease = self._leases.get(role)
        return lease is not None and lease.held()

    def fence(self, role: str) -> Fence | None:
        """The :class:`Fence` of ``role`` while this process leads it (to pass into the role's
        writes, :func:`check_fence`), else None."""
        lease = self._leases.get(role)
        if lease is None or not lease.held() or lease.fencing is None:
            return None
        return Fence(role, lease.fencing)

    def leading(self) -> list[str]:
        """The roles this process leads now."""
        return sorted(r for r, lease in list(self._leases.items()) if lease.held())

    def _give_up(self, lease: Lease) -> None:
        was = lease.held()
        if was:
            lease.release()
        with self._lock:
            notify = lease.role in self._leading
            self._leading.discard(lease.role)
        if notify:
            self._call(self.on_lost, lease.role)

    def _call(self, callback, role: str) -> None:
        try:
            callback(role)
        except Exception:
            log.exception("lease %s: callback %s failed", role, callback)

    def _renew_loop(self) -> None:
        while not self._stop.is_set():
            leases = list(self._leases.values())
            for lease in leases:
                if self._stop.is_set():
                    break
                self._try(lease)
            close_old_connections()
            waiting = any(not lease.held() or lease.renew_failed for lease in leases)
            self._wake.wait(self.poll_s if waiting else self.ttl_s / 3)
            self._wake.clear()
        connection.close()  # this thread's connection

    def _fence_loop(self) -> None:
        while not self._stop.wait(0.1):
            with self._lock:
                lost = [r for r in self._leading if not (r in self._leases and self._leases[r].held())]
                self._leading.difference_update(lost)
            for role in lost:
                log.warning("lease %s: no longer leading", role)
                self._call(self.on_lost, role)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop campaigning and release the roles held (on_lost is called for each)."""
        self._stop.set()
        self._wake.set()
        if self._renewer.is_alive():
            self._renewer.join(timeout)
        if self._fence.is_alive():
            self._fence.join(timeout)
        for lease in list(self._leases.values()):
            self._give_up(lease)
        close_old_connections()


def role_states(grace_s: float = 0.0) -> list[dict]:
    """Every role's row: ``[{"role", "holder", "fencing", "renewed_at", "expires_at", "up"}]``,
    ``up`` False once ``expires_at`` is more than ``grace_s`` seconds past (no live leader)."""
    from core.models import Lease as LeaseRow

    cutoff = timezone.now() - timedelta(seconds=grace_s)
    return [
        {
            "role": row.role,
            "holder": row.holder,
            "fencing": row.fencing,
            "renewed_at": row.renewed_at,
            "expires_at": row.expires_at,
            "up": row.expires_at >= cutoff,
        }
        for row in LeaseRow.objects.all()
    ]


def forget_expired() -> list[str]:
    """Delete the lease rows whose ``expires_at`` has passed (no live leader) and return their
    roles, sorted. For a restarted embedded deployment only (the demo on an existing database):
    one process runs every role there, so an expired row is the previous run's, and left in place
    the role watch raised a Critical ``system.role_down`` (and mailed it) in the seconds before the
    new run's listener took its lease. A live row (a leader renewing now) is kept; never call this
    where other hosts run roles: their fencing numbers start again at 1."""
    from core.models import Lease as LeaseRow

    expired = LeaseRow.objects.filter(expires_at__lt=timezone.now())
    roles = sorted(expired.values_list("role", flat=True))
    expired.filter(role__in=roles).delete()
    return roles
