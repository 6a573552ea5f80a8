"""``system.role_down``: a singleton role without a live leader (issue 25 §1).

The roles' heartbeats are their lease rows (``core.leases``, ``core.models.Lease``): a role whose
lease expired more than ``WEFT_LEASE_TTL_S`` ago (the leader died and no standby took over, or the
only instance stopped) raises the Critical alarm ``system.role_down`` (object key: the role);
``system.role_up`` clears it when a leader renews again. Checked by the beat
(``events.tasks.role_watch_task``) and by every ``listen_notices`` at each rescan, so a dead beat
is alarmed by a notice listener and the other way round. A notice listener's role of a fabric that
no longer exists or is no longer live is retired (its row deleted, its alarm cleared).

Site workers' heartbeats (rows ``worker:<site>:<nodename>``, ``core.sites``) are not singleton
roles: a site may run several workers, and one of them stopping is no fault while another runs.
They are checked per **site** instead (:func:`check_sites`, from :func:`check_roles`): a live
fabric whose site has no live worker gets the Critical ``system.site_down`` on that fabric (its
work is refused with a 503 and its periodic work skipped; the other sites' fabrics are not
touched); ``system.site_up`` clears it when a worker of the site reports again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.models import Lease
from core.sites import checks_enabled, parse_worker_role, site_states
from fabric.collectors.tools import is_live
from fabric.models import Fabric

from .engine import AlarmEngine, lock_fabric
from .recording import EventSpec

DOWN, UP = "system.role_down", "system.role_up"
SITE_DOWN, SITE_UP = "system.site_down", "system.site_up"
#: the advisory lock of :func:`check_roles` (an arbitrary 64-bit key: "weftrole")
ADVISORY_KEY = 0x77656674726F6C65


@dataclass
class RoleState:
    """One role's state: ``role``, ``up`` (a live leader), ``age_s`` (seconds since its lease
    expired; negative while running), ``holder``, and the event written now ("" if none)."""

    role: str
    up: bool
    age_s: float
    holder: str
    wrote: str = ""


def _retired(role: str) -> bool:
    if not role.startswith("notices:"):
        return False
    try:
        fabric = Fabric.objects.filter(pk=int(role.split(":", 1)[1])).first()
    except ValueError:
        return True
    return fabric is None or not is_live(fabric)


def check_roles(now: datetime | None = None) -> list[RoleState]:
    """Check every role's lease; write ``system.role_down``/``system.role_up`` and apply them (one
    transaction under a transaction-scoped advisory lock on PostgreSQL, so two checkers never both
    write; the lease rows themselves are not locked: renewals never wait for a check). Returns
    one :class:`RoleState` per role still tracked."""
    grace = timedelta(seconds=float(settings.WEFT_LEASE_TTL_S))
    out: list[RoleState] = []
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_KEY])
        now = now or timezone.now()
        engine = AlarmEngine(None)
        rows = list(Lease.objects.order_by("role"))
        specs: list[EventSpec] = []
        for row in rows:
            if parse_worker_role(row.role) is not None:
                continue  # a site worker's heartbeat: check_sites
            is_open = (DOWN, row.role) in engine.open_alarms
            where = {"object_type": "role", "object_key": row.role, "object_repr": f"role {row.role}"}
            if _retired(row.role):
                Lease.objects.filter(role=row.role, expires_at__lt=now).delete()  # unless renewed since
                if is_open:
                    specs.append(
                        EventSpec(code=UP, message=f"Role {row.role} retired (its fabric is gone)", **where)
                    )
                continue
            age = (now - row.expires_at).total_seconds()
            state = RoleState(row.role, now <= row.expires_at + grace, age, row.holder)
            if not state.up and not is_open:
                state.wrote = DOWN
                specs.append(EventSpec(
                    code=DOWN,
                    message=(f"Role {row.role} has no live instance: its lease expired {age:.0f} s ago "
                             f"(last leader {row.holder}); start it (or a standby) on another host"),
                    details={"age_s": round(age, 1), "holder": row.holder, "fencing": row.fencing},
                    **where,
                ))  # fmt: skip
            elif state.up and is_open:
                state.wrote = UP
                specs.append(EventSpec(
                    code=UP, message=f"Role {row.role} is led again by {row.holder}",
                    details={"holder": row.holder, "fencing": row.fencing}, **where,
                ))  # fmt: skip
            out.append(state)
        engine.write_events(specs)
        engine.finish()
    check_sites(now)
    return out


@dataclass
class SiteCheck:
    """One live fabric's site check: ``fabric``, ``site``, ``up``, and the event written now."""

    fabric: str
    site: str
    up: bool
    wrote: str = ""


def check_sites(now: datetime | None = None) -> list[SiteCheck]:
    """Raise ``system.site_down`` on each live fabric whose site has no live worker, and
    ``system.site_up`` on those whose site has one again (module docstring); one transaction per
    fabric with its row locked (as every alarm evaluation). Nothing when site checks are off
    (``core.sites.checks_enabled``: the embedded deployment serves every site itself)."""
    if not checks_enabled():
        return []
    fabrics = [f for f in Fabric.objects.order_by("name") if is_live(f)]
    states = site_states(sorted({f.site for f in fabrics}), now=now)
    out: list[SiteCheck] = []
    for fabric in fabrics:
        state = states[fabric.site]
        check = SiteCheck(fabric.name, fabric.site, state.up)
        with transaction.atomic():
            engine = AlarmEngine(lock_fabric(fabric.pk))
            key = f"site:{fabric.site}"
            where = {"object_type": "site", "object_key": key, "object_repr": f"site {fabric.site}"}
            is_open = (SITE_DOWN, key) in engine.open_alarms
            spec = None
            if not state.up and not is_open:
                since = (
                    f"since {state.down_since:%Y-%m-%d %H:%M:%S} UTC"
                    if state.down_since
                    else "(no worker has ever reported for it)"
                )
                spec = EventSpec(
                    code=SITE_DOWN,
                    message=(f"Site {fabric.site} has no live worker {since}: the discoveries, sweeps "
                             f"and other work of fabric {fabric.name} are not run. Start a worker on a "
                             f"host cabled to it: celery -A weft worker -Q {state.queue}"),
                    details=state.as_dict(), **where,
                )  # fmt: skip
            elif state.up and is_open:
                spec = EventSpec(
                    code=SITE_UP,
                    message=f"Site {fabric.site} has a live worker again ({', '.join(state.workers)})",
                    details=state.as_dict(), **where,
                )  # fmt: skip
            if spec is not None:
                check.wrote = spec.code
                engine.write_events([spec])
            engine.finish()
        out.append(check)
    return out


class RoleCollector:
    """``weft_role_up{role}`` (1 while the role's lease runs or lapsed less than
    ``WEFT_LEASE_TTL_S`` ago, else 0), ``weft_role_fencing{role}`` (its take-over count), and
    ``weft_site_up{site}`` / ``weft_site_workers{site}`` for the sites of the fabrics, for
    ``/metrics`` (``telemetry.metrics.register_collector``). Roles are not per fabric: a
    ``fabric_id`` selection keeps them all."""

    def __init__(self, fabric_id: int | None = None) -> None:
        self.fabric_id = fabric_id

    def describe(self) -> list:
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        from core.leases import role_states

        up = GaugeMetricFamily(
            "weft_role_up", "1 while the singleton role has a live leader", labels=["role"]
        )
        fencing = GaugeMetricFamily("weft_role_fencing", "Take-overs of the role's lease", labels=["role"])
        for state in role_states(grace_s=float(settings.WEFT_LEASE_TTL_S)):
            if parse_worker_role(state["role"]) is not None:
                continue  # a site worker's heartbeat: weft_site_up
            up.add_metric([state["role"]], 1.0 if state["up"] else 0.0)
            fencing.add_metric([state["role"]], float(state["fencing"]))
        yield up
        yield fencing
        site_up = GaugeMetricFamily(
            "weft_site_up", "1 while the collector site has a live worker (core.sites)", labels=["site"]
        )
        workers = GaugeMetricFamily(
            "weft_site_workers", "Live workers of the collector site", labels=["site"]
        )
        used = set(Fabric.objects.values_list("site", flat=True))
        for site, state in sorted(site_states(sorted(used)).items()):
            site_up.add_metric([site], 1.0 if state.up else 0.0)
            workers.add_metric([site], float(len(state.workers)))
        yield site_up
        yield workers
