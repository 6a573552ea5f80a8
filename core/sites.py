"""Collector sites: where a fabric's I/O can run, and whether a worker is there (issue 25 §2).

Only a host cabled to a fabric (its HCA on that subnet, or the lab's simulator socket) can run the
diags, PerfMgt MADs, OpenSM signals and SMPs of that fabric. A **site** names such a place:
``Fabric.site`` (default :data:`DEFAULT_SITE`). Each site has one Celery queue,
:func:`site_queue`: ``fabric`` for the default site (the queue every one-site install already runs,
``celery -A weft worker -Q fabric``), ``fabric.<site>`` for the others; a worker is started with
the queues of the sites it is cabled to (``-Q fabric.lab-a,fabric.lab-b``), and a fabric's
discoveries, sweeps, partition applies, port actions, LFT reads and SM watch go only to its site's
queue (``weft.queues.fabric_queue``).

**Liveness.** Every worker that consumes a site queue holds a lease row (``core.models.Lease``,
written only by ``core.leases.Lease``: the roles' heartbeat) named :func:`worker_role`
(``worker:<site>:<celery nodename>``), renewed every ``WEFT_LEASE_TTL_S / 3`` by a thread of its
main process (``weft.worker``) and released when it stops. A site is *live* while at least one of
its rows expired less than ``WEFT_LEASE_TTL_S`` ago (:func:`site_states`). Work asked of a fabric
whose site is not live is refused with :class:`SiteDown` (HTTP 503) instead of waiting in a queue
no worker reads; the periodic fan-outs skip that site's fabrics; ``events.roles`` raises
``system.site_down`` on each of its fabrics.

The check is on when Celery workers are separate processes (:func:`checks_enabled`): the embedded
deployment's in-process worker and eager task runs serve every site themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from core.errors import DomainError

#: the site of a fabric that names none; its queue is the historical ``fabric`` queue
DEFAULT_SITE = "default"
#: the default site's queue, and the prefix of the others' (``fabric.<site>``)
FABRIC_QUEUE = "fabric"
#: a site name: lower-case letters, digits, ``-`` and ``_``, starting with a letter or digit,
#: at most 32 characters (it becomes part of a queue name and a lease role)
SITE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: the lease roles of site workers: ``worker:<site>:<nodename>``
ROLE_PREFIX = "worker:"


def validate_site(value: str) -> None:
    """Django validator of a site name (:data:`SITE_RE`). Raises ``ValidationError`` saying the rule."""
    if not isinstance(value, str) or not SITE_RE.match(value):
        raise ValidationError(
            "a site name is 1-32 characters: lower-case letters, digits, '-' and '_', starting with "
            "a letter or digit (it names the Celery queue fabric.<site>)",
            code="invalid_site",
        )


def site_queue(site: str | None) -> str:
    """The Celery queue of ``site``: :data:`FABRIC_QUEUE` for the default site (or None/empty),
    ``fabric.<site>`` otherwise."""
    if not site or site == DEFAULT_SITE:
        return FABRIC_QUEUE
    return f"{FABRIC_QUEUE}.{site}"


def site_of_queue(queue: str) -> str | None:
    """The site whose queue is ``queue`` (inverse of :func:`site_queue`), None for another queue
    (``control``)."""
    if queue == FABRIC_QUEUE:
        return DEFAULT_SITE
    prefix = FABRIC_QUEUE + "."
    if queue.startswith(prefix) and SITE_RE.match(queue[len(prefix) :]):
        return queue[len(prefix) :]
    return None


def worker_role(site: str, nodename: str) -> str:
    """The lease role of worker ``nodename`` (Celery's ``-n``, e.g. ``fabric@host1``) at ``site``."""
    return f"{ROLE_PREFIX}{site}:{nodename}"[:200]


def parse_worker_role(role: str) -> tuple[str, str] | None:
    """``(site, nodename)`` of a :func:`worker_role`, None for any other role."""
    if not role.startswith(ROLE_PREFIX):
        return None
    site, sep, node = role[len(ROLE_PREFIX) :].partition(":")
    return (site, node) if sep else None


def checks_enabled() -> bool:
    """Whether site liveness is checked (``settings.WEFT_SITE_CHECK``; default on when workers are
    separate processes: not the embedded deployment, not eager task runs)."""
    return bool(settings.WEFT_SITE_CHECK)


@dataclass
class SiteState:
    """One site's liveness: ``up`` (a worker's heartbeat is current), ``workers`` (the live
    workers' nodenames), ``down_since`` (when the last heartbeat lapsed; None while up or when no
    worker ever reported), ``known`` (some worker reported once)."""

    site: str
    up: bool
    workers: list[str] = field(default_factory=list)
    down_since: datetime | None = None
    known: bool = False

    @property
    def queue(self) -> str:
        return site_queue(self.site)

    def as_dict(self) -> dict:
        return {
            "site": self.site,
            "queue": self.queue,
            "up": self.up,
            "workers": self.workers,
            "down_since": self.down_since.isoformat() if self.down_since else None,
        }


def site_states(sites: list[str] | None = None, now: datetime | None = None) -> dict[str, SiteState]:
    """The liveness of ``sites`` (default: every site a worker ever reported for), from the
    workers' lease rows (see the module docstring). A site with no row is down, ``known`` False."""
    from core.models import Lease

    now = now or timezone.now()
    grace = timedelta(seconds=float(settings.WEFT_LEASE_TTL_S))
    out: dict[str, SiteState] = {s: SiteState(s, False) for s in (sites or [])}
    for role, expires in Lease.objects.filter(role__startswith=ROLE_PREFIX).values_list("role", "expires_at"):
        parsed = parse_worker_role(role)
        if parsed is None or (sites is not None and parsed[0] not in out):
            continue
        site, node = parsed
        state = out.setdefault(site, SiteState(site, False))
        state.known = True
        if now <= expires + grace:
            state.up = True
            state.workers.append(node)
        elif state.down_since is None or expires > state.down_since:
            state.down_since = expires
    for state in out.values():
        state.workers.sort()
        if state.up:
            state.down_since = None
    return out


class SiteDown(DomainError):
    """503: work for a fabric whose site has no live worker was refused (nothing was queued).
    The body names the site, its queue, that no worker is live and since when."""

    status_code = 503

    def __init__(self, state: SiteState, what: str) -> None:
        self.state = state
        self.what = what
        if state.known and state.down_since:
            since = f"since {state.down_since:%Y-%m-%d %H:%M:%S} UTC (its last worker's heartbeat lapsed)"
        else:
            since = "(no worker has reported for it)"
        super().__init__(
            f"{what} not queued: site {state.site!r} has no live worker {since}. Start a worker "
            f"on a host cabled to the fabric: celery -A weft worker -Q {state.queue}"
        )

    def as_dict(self) -> dict:
        return {"detail": str(self), **self.state.as_dict()}


def require_live(site: str, what: str) -> None:
    """Raise :class:`SiteDown` when checks are on (:func:`checks_enabled`) and ``site`` has no
    live worker; ``what`` says the refused work (e.g. ``"discovery of fabric lab-a"``)."""
    if not checks_enabled():
        return
    state = site_states([site])[site]
    if not state.up:
        raise SiteDown(state, what)


def live_sites(sites: list[str]) -> set[str]:
    """Those of ``sites`` with a live worker (all of them when checks are off)."""
    if not checks_enabled():
        return set(sites)
    return {s for s, st in site_states(sorted(set(sites))).items() if st.up}


#: seconds a fan-out's "queued, not started yet" mark lasts when the task sets no time limit
PENDING_TTL_S = 600.0


def pending_key(task_name: str, args) -> str:
    """The cache key marking a fan-out's call of ``task_name(*args)`` queued and not started yet
    (set by :func:`fan_out`, deleted by the task when it starts: ``weft.celery.WeftTask``)."""
    return "weft:pending:" + task_name + ":" + ":".join(str(a) for a in args)


def mark_pending(task_name: str, args, ttl: float = PENDING_TTL_S) -> bool:
    """Mark ``task_name(*args)`` queued for ``ttl`` seconds; False when it already is (its previous
    call has not started: do not queue another)."""
    return _mark_pending(pending_key(task_name, args), ttl)


def _mark_pending(key: str, ttl: float) -> bool:
    """Set the pending mark; False when it is already set (a cache that is down: True, logged)."""
    from django.core.cache import cache

    try:
        return bool(cache.add(key, 1, timeout=ttl))
    except Exception as exc:  # Redis down: queue anyway (the task's own lock still holds)
        import logging

        logging.getLogger(__name__).warning("pending mark %s not set: %s", key, exc)
        return True


def _clear_pending(key: str) -> None:
    from django.core.cache import cache

    try:
        cache.delete(key)
    except Exception:
        pass


def clear_pending(task_name: str, args) -> None:
    """Delete the pending mark of ``task_name(*args)`` (the call has started); never raises."""
    _clear_pending(pending_key(task_name, args))


def fan_out(task, fabrics, *, args=None, log=None) -> list[dict]:
    """Queue ``task(*args(fabric))`` (default ``(fabric.pk,)``) once per fabric of ``fabrics``
    (objects with ``pk``, ``name``, ``site``), each to its site's queue (``weft.queues``): the
    periodic fan-outs, so that several workers of a site (and the workers of several sites) run
    the fabrics in parallel, and a fabric's I/O runs only where its site's workers are.

    A fabric whose site has no live worker is skipped (``{"fabric", "site", "skipped"}``): its
    ``system.site_down`` alarm says so, and nothing piles up in a queue no worker reads. A call
    whose previous one is still waiting in the queue (not started: a mark in the cache, deleted
    when the task starts, lasting at most the task's time limit or :data:`PENDING_TTL_S`) is not
    queued again (``{"fabric", "site", "skipped": "… still queued"}``): a fabric whose sweeps take
    longer than the beat's interval (a hung one) has at most one call waiting, never a backlog
    that grows at every tick. Where no
    worker runs at all (eager runs, a one-shot command: the call ran at once) the task's own result
    is returned in its place, else ``{"fabric", "site", "queued": True}``; a call that raised is
    ``{"fabric", "error"}`` (logged), and the other fabrics go on.
    """
    from celery.exceptions import SoftTimeLimitExceeded
    from celery.result import AsyncResult, EagerResult

    fabrics = list(fabrics)
    live = live_sites([f.site for f in fabrics])
    out: list[dict] = []
    for fabric in fabrics:
        if fabric.site not in live:
            out.append({"fabric": fabric.name, "site": fabric.site, "skipped": "its site has no live worker"})
            continue
        call = tuple(args(fabric) if args else (fabric.pk,))
        key = pending_key(task.name, call)
        if not _mark_pending(key, float(getattr(task, "time_limit", None) or PENDING_TTL_S)):
            out.append(
                {"fabric": fabric.name, "site": fabric.site, "skipped": "its previous call is still queued"}
            )
            continue
        try:
            result = task.delay(*call)
        except SoftTimeLimitExceeded:
            _clear_pending(key)
            raise
        except Exception as exc:  # one fabric's bug or bad setting: the next ones are queued
            _clear_pending(key)
            if log is not None:
                log.error(
                    "%s of %s failed: %s: %s", task.name, fabric.name, type(exc).__name__, exc, exc_info=exc
                )
            out.append({"fabric": fabric.name, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        if isinstance(result, EagerResult):
            value = result.result
            if isinstance(value, BaseException):
                out.append({"fabric": fabric.name, "error": f"{type(value).__name__}: {value}"[:300]})
            else:
                out.append(value)
        elif isinstance(result, AsyncResult) or result is None or hasattr(result, "done"):
            out.append({"fabric": fabric.name, "site": fabric.site, "queued": True})
        else:
            out.append(result)  # the embedded deployment without its worker ran the call at once
    return out
