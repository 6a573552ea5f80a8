"""The rules engine: events → alarms and mail, and condition rules after discoveries and sweeps.

Flow (docs/design.md): the discovery ingest and the counter sweep commit, then send
``discovery_committed``/``sweep_committed``; ``events.apps`` enqueues ``evaluate_discovery_task``/
``evaluate_sweep_task`` which call :func:`evaluate_discovery`/:func:`evaluate_sweep` here.

Each evaluation runs in one transaction with the fabric row locked (``select_for_update``), so
two evaluations of one fabric never interleave:

1. condition rules measure the fabric (counter deltas and rates, congestion streaks kept in
   ``ConditionState``, duplicate GUIDs/LIDs, sweep and discovery status) and write *events* for
   conditions that start (after ``consecutive`` evaluations) or stop holding;
2. :func:`process_pending_events` applies each not-yet-evaluated event of the fabric (including
   the ingest's topology events and the SM watch's) in id order: the policy's severity, clearing
   of the alarms it ``clears``, raising or updating its alarm, and queueing mail in the
   ``Notification`` outbox;
3. alarms whose TTL passed are cleared.

After commit the outbox is sent (``events.notify``) and alarm changes are published over
Channels (group ``weft.realtime.group_name("alarms", fabric_id)`` and ``...("alarms", "all")``,
message ``alarm.changed``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .catalog import CATALOG, event_type
from .keys import port_key
from .models import Alarm, AlarmState, ConditionState, Event, EventPolicy, Notification, NotificationKind
from .services import EventSpec, record_events

log = logging.getLogger(__name__)


@dataclass
class Policy:
    """An event type's effective policy: the catalogue default overridden by its ``EventPolicy``."""

    code: str
    name: str
    category: str
    severity: str
    enabled: bool
    raise_alarm: bool
    email: bool
    notify_clear: bool
    digest: bool
    ttl_s: int
    threshold: float | None
    consecutive: int
    clears: tuple[str, ...]
    clear_scope: str
    recipients: list[str] = field(default_factory=list)


def load_policies() -> dict[str, Policy]:
    """Return ``{code: Policy}`` for every catalogue code and every stored policy row."""
    rows = {
        p.code: p
        for p in EventPolicy.objects.prefetch_related("recipient_users", "recipient_groups__user_set")
    }
    fallback = list(getattr(settings, "WEFT_ALERT_EMAILS", []) or [])
    out: dict[str, Policy] = {}
    for code in set(CATALOG) | set(rows):
        t = event_type(code)
        row = rows.get(code)
        policy = Policy(
            code=code,
            name=t.name,
            category=t.category,
            severity=t.severity,
            enabled=True,
            raise_alarm=t.raise_alarm,
            email=t.email,
            notify_clear=t.notify_clear,
            digest=False,
            ttl_s=t.ttl_s,
            threshold=t.threshold,
            consecutive=t.consecutive,
            clears=t.clears,
            clear_scope=t.clear_scope,
            recipients=list(fallback),
        )
        if row is not None:
            policy.severity = row.severity
            policy.enabled = row.enabled
            policy.raise_alarm = row.raise_alarm
            policy.email = row.email
            policy.notify_clear = row.notify_clear
            policy.digest = row.digest
            policy.ttl_s = row.ttl_s
            policy.threshold = row.threshold
            policy.consecutive = max(1, row.consecutive)
            policy.recipients = policy_recipients(row) or list(fallback)
        out[code] = policy
    return out


def policy_recipients(row: EventPolicy) -> list[str]:
    """Addresses of a policy: its explicit addresses, its users' and its groups' members' emails
    (active users with an address only), deduplicated case-insensitively, in that order."""
    seen: dict[str, str] = {}
    raw = row.recipient_emails.replace(";", ",").replace("\n", ",")
    candidates = [a.strip() for a in raw.split(",")]
    candidates += [u.email for u in row.recipient_users.all() if u.is_active]
    for group in row.recipient_groups.all():
        candidates += [u.email for u in group.user_set.all() if u.is_active]
    for address in candidates:
        if address and "@" in address:
            seen.setdefault(address.lower(), address)
    return list(seen.values())


def ensure_policies() -> int:
    """Create the missing ``EventPolicy`` rows from the catalogue defaults; returns how many."""
    existing = set(EventPolicy.objects.values_list("code", flat=True))
    rows = [
        EventPolicy(
            code=t.code,
            severity=t.severity,
            threshold=t.threshold,
            consecutive=t.consecutive,
            ttl_s=t.ttl_s,
            raise_alarm=t.raise_alarm,
            email=t.email,
            notify_clear=t.notify_clear,
        )
        for t in CATALOG.values()
        if t.code not in existing
    ]
    EventPolicy.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


@dataclass
class Outcome:
    """What one evaluation changed: alarms opened, updated (raised again) and cleared, events
    evaluated, and notifications queued."""

    fabric_id: int | None = None
    events: int = 0
    raised: list[Alarm] = field(default_factory=list)
    updated: list[Alarm] = field(default_factory=list)
    cleared: list[Alarm] = field(default_factory=list)
    notifications: int = 0

    def summary(self) -> dict[str, int]:
        return {
            "events": self.events,
            "raised": len(self.raised),
            "updated": len(self.updated),
            "cleared": len(self.cleared),
            "notifications": self.notifications,
        }


class _Engine:
    """State of one evaluation of one fabric (inside the caller's transaction)."""

    def __init__(self, fabric, policies: dict[str, Policy] | None = None):
        self.fabric = fabric
        self.policies = policies if policies is not None else load_policies()
        self.outcome = Outcome(fabric_id=fabric.pk if fabric is not None else None)
        self._open: dict[tuple[str, str], Alarm] | None = None
        self._notifications: list[Notification] = []

    def policy(self, code: str) -> Policy:
        found = self.policies.get(code)
        if found is None:
            t = event_type(code)
            found = Policy(code, t.name, t.category, t.severity, True, False, False, False, False, 0,
                           None, 1, (), "key")  # fmt: skip
            self.policies[code] = found
        return found

    @property
    def open_alarms(self) -> dict[tuple[str, str], Alarm]:
        if self._open is None:
            qs = Alarm.objects.open().filter(fabric=self.fabric).select_for_update()
            self._open = {(a.code, a.object_key): a for a in qs}
        return self._open

    # -- events ------------------------------------------------------------------------------
    def process_pending(self) -> None:
        pending = list(
            Event.objects.filter(fabric=self.fabric, evaluated=False).order_by("id").select_for_update()
        )
        if not pending:
            return
        resevered: list[Event] = []
        for event in pending:
            policy = self.policy(event.code)
            if event.severity != policy.severity:
                event.severity = policy.severity
                resevered.append(event)
            event.evaluated = True
            self.outcome.events += 1
            if not policy.enabled:
                continue
            for code in policy.clears:
                for alarm in self._matching_open(code, event.object_key, policy.clear_scope):
                    self.clear(alarm, at=event.at, event=event, reason=f"{event.code} ({policy.name})")
            if policy.raise_alarm:
                self.raise_alarm(event, policy)
            elif policy.email:
                self._queue(policy.recipients, NotificationKind.EVENT, event=event)
        Event.objects.bulk_update(pending, ["evaluated"], batch_size=1000)
        if resevered:
            Event.objects.bulk_update(resevered, ["severity"], batch_size=1000)

    def _matching_open(self, code: str, key: str, scope: str) -> list[Alarm]:
        if scope == "fabric":
            return [a for (c, _), a in self.open_alarms.items() if c == code]
        alarm = self.open_alarms.get((code, key))
        return [alarm] if alarm is not None else []

    def raise_alarm(self, event: Event, policy: Policy) -> Alarm:
        key = (event.code, event.object_key)
        alarm = self.open_alarms.get(key)
        if alarm is not None:
            alarm.count += 1
            alarm.last_seen = max(alarm.last_seen, event.at)
            alarm.severity = policy.severity
            alarm.message = event.message
            alarm.details = event.details
            alarm.ttl_s = policy.ttl_s
            alarm.node_id = event.node_id or alarm.node_id
            alarm.port_id = event.port_id or alarm.port_id
            alarm.save(
                update_fields=[
                    "count",
                    "last_seen",
                    "severity",
                    "message",
                    "details",
                    "ttl_s",
                    "node",
                    "port",
                ]
            )
            if alarm not in self.outcome.raised and alarm not in self.outcome.updated:
                self.outcome.updated.append(alarm)
            return alarm
        alarm = Alarm.objects.create(
            fabric=self.fabric,
            code=event.code,
            severity=policy.severity,
            category=policy.category,
            object_type=event.object_type,
            object_key=event.object_key,
            object_repr=event.object_repr,
            node_id=event.node_id,
            port_id=event.port_id,
            message=event.message,
            details=event.details,
            first_seen=event.at,
            last_seen=event.at,
            ttl_s=policy.ttl_s,
            raised_event=event,
        )
        self.open_alarms[key] = alarm
        self.outcome.raised.append(alarm)
        if policy.email:
            self._queue(policy.recipients, NotificationKind.RAISED, alarm=alarm)
        return alarm

    def clear(self, alarm: Alarm, *, at: datetime, event: Event | None = None, reason: str = "", user=None):
        """Clear an open alarm (and queue the clear notice when its policy asks for one)."""
        alarm.state = AlarmState.CLEARED
        alarm.cleared_at = at
        alarm.cleared_event = event
        alarm.cleared_by = user
        alarm.clear_reason = reason[:200]
        alarm.save(update_fields=["state", "cleared_at", "cleared_event", "cleared_by", "clear_reason"])
        self.open_alarms.pop((alarm.code, alarm.object_key), None)
        self.outcome.cleared.append(alarm)
        policy = self.policy(alarm.code)
        if policy.email and policy.notify_clear and policy.enabled:
            self._queue(policy.recipients, NotificationKind.CLEARED, alarm=alarm)

    def expire(self, now: datetime) -> None:
        for alarm in list(self.open_alarms.values()):
            if alarm.ttl_s and alarm.last_seen + timedelta(seconds=alarm.ttl_s) <= now:
                self.clear(alarm, at=now, reason=f"TTL of {alarm.ttl_s} s expired")

    def _queue(self, recipients: Iterable[str], kind: str, alarm: Alarm | None = None, event=None) -> None:
        rows = [Notification(recipient=r, kind=kind, alarm=alarm, event=event) for r in recipients]
        self._notifications.extend(rows)
        self.outcome.notifications += len(rows)

    # -- conditions --------------------------------------------------------------------------
    def conditions(self, code: str, measured: dict[str, tuple[bool | None, float | None, dict]],
                   describe, all_keys_measured: bool = True) -> list[EventSpec]:  # fmt: skip
        """Apply a condition rule to measured objects and return the events to write.

        ``measured`` maps object key → ``(over, value, info)``: ``over`` True when the condition
        holds, False when it does not, None when it could not be measured (streak untouched).
        ``describe(key, over, value, info)`` returns an ``EventSpec`` for the raise (``over``) or
        the clearing event (None: clear the alarm without an event). With ``all_keys_measured``, open alarms of ``code`` whose key was not
        measured count as "does not hold" (e.g. a duplicate LID that disappeared).
        """
        policy = self.policy(code)
        if not policy.enabled:
            return []
        states = {
            s.object_key: s
            for s in ConditionState.objects.filter(fabric=self.fabric, code=code).select_for_update()
        }
        if all_keys_measured:
            for (c, key), _alarm in self.open_alarms.items():
                if c == code and key not in measured:
                    measured[key] = (False, None, {})
            for key in list(states):
                if key not in measured:
                    measured[key] = (False, None, {})
        specs: list[EventSpec] = []
        new_states: list[ConditionState] = []
        changed: list[ConditionState] = []
        for key, (over, value, info) in measured.items():
            if over is None:
                continue
            state = states.get(key)
            if state is None:
                if not over and (code, key) not in self.open_alarms:
                    continue
                state = ConditionState(fabric=self.fabric, code=code, object_key=key)
                new_states.append(state)
            elif state not in changed:
                changed.append(state)
            state.value = value
            alarm = self.open_alarms.get((code, key))
            if over:
                state.over += 1
                state.under = 0
                if alarm is None and state.over >= policy.consecutive:
                    specs.append(describe(key, True, value, info))
                elif alarm is not None:
                    # Still over: keep the open alarm fresh without a new event per sweep.
                    alarm.last_seen = timezone.now()
                    alarm.details = {**alarm.details, "value": value}
                    alarm.save(update_fields=["last_seen", "details"])
            else:
                state.under += 1
                state.over = 0
                if alarm is not None:
                    spec = describe(key, False, value, info)
                    if spec is not None:
                        specs.append(spec)
                    else:
                        self.clear(alarm, at=timezone.now(), reason="condition no longer holds")
        ConditionState.objects.bulk_create(new_states)
        if changed:
            ConditionState.objects.bulk_update(changed, ["over", "under", "value"])
        return specs

    def finish(self) -> Outcome:
        if self._notifications:
            Notification.objects.bulk_create(self._notifications)
        outcome = self.outcome
        if outcome.raised or outcome.updated or outcome.cleared or outcome.notifications:
            transaction.on_commit(lambda: after_commit(outcome))
        return outcome


def after_commit(outcome: Outcome) -> None:
    """Send the queued mail (through the notify task) and publish alarm changes over Channels."""
    from .realtime import publish_alarm_changes

    if outcome.notifications:
        from .tasks import send_notifications_task

        try:
            send_notifications_task.delay()
        except Exception:  # the periodic flush sends them later
            log.warning("could not enqueue the notification task", exc_info=True)
    publish_alarm_changes(outcome)


def _lock_fabric(fabric_id: int):
    from fabric.models import Fabric

    return Fabric.objects.select_for_update().get(pk=fabric_id)


def process_pending_events(fabric_id: int) -> Outcome:
    """Apply the policies of the fabric's not-yet-evaluated events (one transaction).

    Used after writers outside a discovery or sweep (the SM watch, the API) record events.
    """
    with transaction.atomic():
        engine = _Engine(_lock_fabric(fabric_id))
        engine.process_pending()
        engine.expire(timezone.now())
        return engine.finish()


# -- discovery ---------------------------------------------------------------------------------


def evaluate_discovery(fabric_id: int, discovery_id: int | None = None) -> Outcome:
    """Rules after a discovery or import committed.

    Health conditions (duplicate port GUIDs, duplicate LIDs, Active ports with LID 0/0xffff)
    raise or clear alarms; a failed discovery raises ``system.discovery_failing``; open
    ``link.down``/``node.removed``/``link.degraded`` alarms whose condition no longer holds in
    the stored topology are cleared; then the ingest's topology events are applied.

    Raises:
        fabric.models.Fabric.DoesNotExist: unknown ``fabric_id``.
    """
    from fabric.models import Discovery

    from . import health

    with transaction.atomic():
        fabric = _lock_fabric(fabric_id)
        engine = _Engine(fabric)
        engine.process_pending()  # topology events first: link.up clears before conditions look
        discovery = Discovery.objects.filter(pk=discovery_id, fabric=fabric).first() if discovery_id else None
        specs: list[EventSpec] = []
        if discovery is not None and discovery.source == "live":
            failed = discovery.status == "failed"
            specs += engine.conditions(
                "system.discovery_failing",
                {fabric.name: (failed, None, {"error": discovery.error[:500]})},
                lambda key, over, value, info: EventSpec(
                    code="system.discovery_failing" if over else "system.discovery_recovered",
                    message=(
                        f"Live discovery of fabric {fabric.name} failed: {info.get('error', '')}"
                        if over
                        else f"Live discovery of fabric {fabric.name} works again"
                    ),
                    object_type="fabric",
                    object_key=key,
                    object_repr=f"fabric {fabric.name}",
                    category="system",
                    details={"discovery": discovery.pk, **info},
                ),  # fmt: skip
            )
        if discovery is None or discovery.status != "failed":
            specs += _health_conditions(engine, health.topology_findings(fabric))
            _clear_stale_topology_alarms(engine, fabric)
        _write(engine, specs)
        engine.expire(timezone.now())
        return engine.finish()


_HEALTH_ALARM_CODES = {
    "duplicate_guid": "health.duplicate_guid",
    "duplicate_lid": "health.duplicate_lid",
    "invalid_lid": "health.invalid_lid",
}


def _health_conditions(engine: _Engine, findings) -> list[EventSpec]:
    specs: list[EventSpec] = []
    for check, code in _HEALTH_ALARM_CODES.items():
        measured = {f.object_key: (True, None, f.as_dict()) for f in findings if f.check == check}
        by_key = {f.object_key: f for f in findings if f.check == check}

        def describe(key, over, value, info, code=code, by_key=by_key):
            finding = by_key.get(key)
            if over and finding is not None:
                return EventSpec(code=code, message=finding.message, category="health",
                                 object_type=finding.object_type, object_key=key,
                                 object_repr=finding.object_repr, details=finding.details)  # fmt: skip
            alarm = engine.open_alarms.get((code, key))
            return EventSpec(code=f"{code}_cleared", category="health",
                             message=f"Resolved: {alarm.message if alarm else key}",
                             object_type=alarm.object_type if alarm else "", object_key=key,
                             object_repr=alarm.object_repr if alarm else key)  # fmt: skip

        specs += engine.conditions(code, measured, describe)
    return specs


def _clear_stale_topology_alarms(engine: _Engine, fabric) -> None:
    """Clear link.down/node.removed alarms the stored topology contradicts, and link.degraded
    alarms of links that are gone.

    The ingest's link.up/node.added events normally clear them; this covers events lost to a
    disabled policy at the time, or an import that rebuilt the fabric.
    """
    from fabric.models import Link, Node

    from . import health

    now = timezone.now()
    codes = {"link.down", "node.removed", "link.degraded"}
    candidates = [a for (c, _), a in engine.open_alarms.items() if c in codes]
    if not candidates:
        return
    links = {
        health.link_key_of(link)
        for link in Link.objects.filter(fabric=fabric).select_related("port_a__node", "port_b__node")
    }
    nodes = set(Node.objects.filter(fabric=fabric).values_list("node_guid", flat=True))
    for alarm in candidates:
        if alarm.code == "link.down" and alarm.object_key in links:
            engine.clear(alarm, at=now, reason="link present in the latest discovery")
        elif alarm.code == "node.removed" and alarm.object_key in nodes:
            engine.clear(alarm, at=now, reason="node present in the latest discovery")
        elif alarm.code == "link.degraded" and alarm.object_key not in links:
            # Its recovery is the ingest's link.up (rate back up); a link that is gone has link.down.
            engine.clear(alarm, at=now, reason="link no longer present")


def _write(engine: _Engine, specs: list[EventSpec]) -> None:
    if specs:
        for spec in specs:
            spec.severity = engine.policy(spec.code).severity
        record_events(engine.fabric, specs)
        engine.process_pending()


# -- counter sweep -----------------------------------------------------------------------------

#: Counter rules: code → (error_deltas key, kind). ``rate`` = errors/min over the interval,
#: ``delta`` = the interval's counter delta.
COUNTER_RULES: dict[str, tuple[str, str]] = {
    "port.link_downed": ("link_downed", "delta"),
    "port.symbol_errors": ("symbol_errors", "rate"),
    "port.rcv_errors": ("rcv_errors", "rate"),
}


def evaluate_sweep(fabric_id: int, sweep_id: int) -> Outcome:
    """Rules after a counter sweep committed (``telemetry.models.Sweep``/``PortCounters``).

    Per port read in this sweep: LinkDownedCounter delta above threshold raises
    ``port.link_downed`` (an event each time; the alarm clears by TTL); SymbolErrorCounter and
    PortRcvErrors rates (errors/min = delta / ``Sweep.interval_s`` × 60) above threshold raise,
    and below clear; the congestion index above threshold for ``consecutive`` sweeps raises and
    a sweep below clears; saturated counters raise and clear when no longer saturated. Ports
    whose rates could not be computed (``error_deltas``/``congestion`` null: first sample,
    reset, saturation) keep their streaks. Per fabric: a failed sweep raises
    ``system.poller_failing`` (an ok/partial sweep clears it); stale ports above threshold
    raise ``fabric.ports_stale``.

    Raises:
        telemetry.models.Sweep.DoesNotExist: unknown ``sweep_id``.
    """
    from telemetry.models import PortCounters, Sweep

    with transaction.atomic():
        fabric = _lock_fabric(fabric_id)
        sweep = Sweep.objects.get(pk=sweep_id, fabric=fabric)
        engine = _Engine(fabric)
        engine.process_pending()
        rows = list(
            PortCounters.objects.filter(sweep=sweep, port__node__fabric=fabric).select_related("port__node")
        )
        specs: list[EventSpec] = []
        ports = {port_key(r.port.node.node_guid, r.port.port_num): r for r in rows}
        interval = sweep.interval_s or None

        def port_spec(code: str, key: str, over: bool, value, info: dict) -> EventSpec:
            row = ports.get(key)
            policy = engine.policy(code)
            name = str(row.port) if row is not None else key
            if over:
                message = info.get("message") or f"{policy.name} on {name}"
                spec_code = code
            else:
                message = f"{policy.name} cleared on {name}"
                spec_code = f"{code}_cleared"
            return EventSpec(
                code=spec_code, message=message, category="counters", object_type="port",
                object_key=key, object_repr=name,
                node_id=row.port.node_id if row is not None else None,
                port_id=row.port_id if row is not None else None,
                details={"value": value, "threshold": policy.threshold, "sweep": sweep.pk, **info},
            )  # fmt: skip

        for code, (counter, kind) in COUNTER_RULES.items():
            policy = engine.policy(code)
            threshold = policy.threshold if policy.threshold is not None else 0.0
            measured: dict[str, tuple[bool | None, float | None, dict]] = {}
            for key, row in ports.items():
                if row.error_deltas is None or row.stale:
                    measured[key] = (None, None, {})
                    continue
                delta = float(row.error_deltas.get(counter, 0) or 0)
                if kind == "rate":
                    if not interval:
                        measured[key] = (None, None, {})
                        continue
                    value = delta / interval * 60.0
                    msg = (f"{policy.name} on {{port}}: {value:.1f}/min ({int(delta)} in {interval:.0f} s), "
                           f"threshold {threshold:g}/min")  # fmt: skip
                else:
                    value = delta
                    msg = f"{policy.name} on {{port}}: counter rose by {int(delta)}"
                if value > threshold:
                    measured[key] = (True, value, {"message": msg.format(port=row.port), "delta": delta})
                else:
                    measured[key] = (False, value, {})
            if kind == "delta":
                # An event per occurrence; the alarm clears through its TTL, not per sweep.
                for key, (over, value, info) in measured.items():
                    if over and policy.enabled:
                        specs.append(port_spec(code, key, True, value, info))
                continue
            specs += engine.conditions(
                code,
                measured,
                lambda k, o, v, i, code=code: port_spec(code, k, o, v, i),
                all_keys_measured=False,
            )

        policy = engine.policy("port.congestion")
        threshold = policy.threshold if policy.threshold is not None else 0.5
        measured = {}
        for key, row in ports.items():
            if row.congestion is None or row.stale:
                measured[key] = (None, None, {})
            elif row.congestion > threshold:
                msg = (f"Congestion on {row.port}: index {row.congestion:.2f} above {threshold:g} "
                       f"for {policy.consecutive} sweeps")  # fmt: skip
                measured[key] = (True, row.congestion, {"message": msg})
            else:
                measured[key] = (False, row.congestion, {})
        specs += engine.conditions(
            "port.congestion", measured, lambda k, o, v, i: port_spec("port.congestion", k, o, v, i),
            all_keys_measured=False,
        )  # fmt: skip

        measured = {}
        for key, row in ports.items():
            names = list(row.saturated or [])
            msg = f"Counters saturated on {row.port}: {', '.join(names)}" if names else ""
            measured[key] = (bool(names), float(len(names)), {"message": msg, "counters": names})
        specs += engine.conditions(
            "port.counters_saturated", measured,
            lambda k, o, v, i: port_spec("port.counters_saturated", k, o, v, i), all_keys_measured=False,
        )  # fmt: skip

        specs += _fabric_sweep_conditions(engine, fabric, sweep)
        _write(engine, specs)
        engine.expire(timezone.now())
        return engine.finish()


def _fabric_sweep_conditions(engine: _Engine, fabric, sweep) -> list[EventSpec]:
    from telemetry.models import PortCounters

    specs: list[EventSpec] = []
    failed = sweep.status == "failed"

    def fabric_spec(over_code: str, clear_code: str, over_msg: str, clear_msg: str, info: dict):
        def describe(key, over, value, _info):
            return EventSpec(
                code=over_code if over else clear_code, message=over_msg if over else clear_msg,
                category=event_type(over_code).category, object_type="fabric", object_key=key,
                object_repr=f"fabric {fabric.name}", details={"sweep": sweep.pk, "value": value, **info},
            )  # fmt: skip

        return describe

    specs += engine.conditions(
        "system.poller_failing",
        {fabric.name: (failed, None, {})},
        fabric_spec("system.poller_failing", "system.poller_recovered",
                    f"Counter sweep of fabric {fabric.name} failed: {sweep.error[:300]}",
                    f"Counter sweeps of fabric {fabric.name} work again", {"error": sweep.error[:300]}),
    )  # fmt: skip
    if not failed:
        policy = engine.policy("fabric.ports_stale")
        threshold = policy.threshold if policy.threshold is not None else 0
        stale = list(
            PortCounters.objects.filter(port__node__fabric=fabric, stale=True)
            .select_related("port__node")
            .order_by("port__node__description", "port__port_num")[:11]
        )
        n = sweep.stale
        names = ", ".join(str(r.port) for r in stale[:10]) + (", ..." if len(stale) > 10 else "")
        specs += engine.conditions(
            "fabric.ports_stale",
            {fabric.name: (n > threshold, float(n), {})},
            fabric_spec("fabric.ports_stale", "fabric.ports_stale_cleared",
                        f"{n} port(s) of fabric {fabric.name} could not be read in the last sweep: {names}",
                        f"All ports of fabric {fabric.name} were read in the last sweep",
                        {"ports": [str(r.port) for r in stale[:10]]}),
        )  # fmt: skip
    return specs


# -- operator actions --------------------------------------------------------------------------


def acknowledge(alarm_id: int, user) -> Alarm:
    """Acknowledge an open alarm (Operator). Idempotent for an acknowledged alarm.

    Raises:
        Alarm.DoesNotExist: unknown id.
        ValueError: the alarm is already cleared.
    """
    from accounts.audit import record

    with transaction.atomic():
        alarm = Alarm.objects.select_for_update().get(pk=alarm_id)
        if alarm.state == AlarmState.CLEARED:
            raise ValueError(f"alarm {alarm_id} is cleared; only open alarms can be acknowledged")
        if alarm.state == AlarmState.ACTIVE:
            alarm.state = AlarmState.ACKNOWLEDGED
            alarm.acknowledged_by = user
            alarm.acknowledged_at = timezone.now()
            alarm.save(update_fields=["state", "acknowledged_by", "acknowledged_at"])
            record("alarm.acknowledge", alarm, {"state": ["active", "acknowledged"]}, user=user)
            outcome = Outcome(fabric_id=alarm.fabric_id, updated=[alarm])
            transaction.on_commit(lambda: after_commit(outcome))
        return alarm


def clear_manually(alarm_id: int, user, reason: str = "") -> Alarm:
    """Clear an open alarm by hand (Operator); the clear notice follows the policy.

    Raises:
        Alarm.DoesNotExist: unknown id.
        ValueError: the alarm is already cleared.
    """
    from accounts.audit import record

    with transaction.atomic():
        alarm = Alarm.objects.select_for_update().get(pk=alarm_id)
        if alarm.state == AlarmState.CLEARED:
            raise ValueError(f"alarm {alarm_id} is already cleared")
        engine = _Engine(alarm.fabric)
        engine._open = {(alarm.code, alarm.object_key): alarm}
        who = getattr(user, "username", "system")
        engine.clear(alarm, at=timezone.now(), reason=reason or f"cleared by {who}", user=user)
        record("alarm.clear", alarm, {"state": ["open", "cleared"], "reason": reason}, user=user)
        engine.finish()
        return alarm


def alarm_payload(alarm: Alarm) -> dict[str, Any]:
    """The JSON form of an alarm for the live page and the ``alarms`` command."""
    return {
        "id": alarm.pk,
        "fabric": alarm.fabric_id,
        "fabric_name": alarm.fabric.name if alarm.fabric_id else "",
        "type": alarm.code,
        "name": alarm.name,
        "severity": alarm.severity,
        "category": alarm.category,
        "state": alarm.state,
        "object_type": alarm.object_type,
        "object_key": alarm.object_key,
        "object": alarm.object_repr,
        "message": alarm.message,
        "first_seen": alarm.first_seen.isoformat(),
        "last_seen": alarm.last_seen.isoformat(),
        "count": alarm.count,
        "acknowledged_by": alarm.acknowledged_by.username if alarm.acknowledged_by_id else None,
        "acknowledged_at": alarm.acknowledged_at.isoformat() if alarm.acknowledged_at else None,
        "cleared_at": alarm.cleared_at.isoformat() if alarm.cleared_at else None,
        "clear_reason": alarm.clear_reason,
        "url": alarm.get_absolute_url(),
    }
