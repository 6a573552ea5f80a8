"""The alarm engine: applies each event's policy (raise, update, clear alarms; queue mail) and
expires alarms past their TTL. It writes no events of its own except through the condition
rules that call :meth:`AlarmEngine.conditions` (``events.rules``).

Each evaluation runs in one transaction with the fabric row locked (:func:`lock_fabric`), so two
evaluations of one fabric never interleave. After commit it sends :data:`alarms_changed`
(``outcome``: an :class:`Outcome`); ``events.receivers`` relays that to the mail task and to
Channels. The engine imports neither tasks nor realtime.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from fabric.models import Fabric

from . import alerting
from .models import Alarm, AlarmState, ConditionState, Event, Notification, NotificationKind
from .policies import Policy, load_policies, policy_for
from .recording import EventSpec, record_events
from .signals import alarms_changed

log = logging.getLogger(__name__)


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


class AlarmEngine:
    """One evaluation of one fabric, inside the caller's transaction (the fabric row locked).

    ``open_alarms`` (``{(code, object_key): Alarm}``) is read with ``select_for_update`` on
    first use, or seeded with ``open_alarms=[...]`` when the caller already locked the alarms it
    acts on (an Operator's clear). Call :meth:`finish` last: it stores the queued mail and, on
    commit, sends :data:`alarms_changed`.
    """

    def __init__(
        self, fabric, policies: dict[str, Policy] | None = None, open_alarms: list[Alarm] | None = None
    ):
        self.fabric = fabric
        self.policies = policies if policies is not None else load_policies()
        self.outcome = Outcome(fabric_id=fabric.pk if fabric is not None else None)
        self._open: dict[tuple[str, str], Alarm] | None = (
            None if open_alarms is None else {(a.code, a.object_key): a for a in open_alarms}
        )
        self._notifications: list[Notification] = []
        self._targets: list | None = None  # enabled alert targets, read on first use
        self._syslog_events: list[Event] = []

    def policy(self, code: str) -> Policy:
        """The effective policy of ``code`` (``events.policies.policy_for``), cached."""
        found = self.policies.get(code)
        if found is None:
            found = self.policies[code] = policy_for(code, self.policies)
        return found

    @property
    def targets(self) -> list:
        """The enabled alert targets (``events.alerting``), read once per evaluation."""
        if self._targets is None:
            self._targets = alerting.enabled_targets()
        return self._targets

    @property
    def open_alarms(self) -> dict[tuple[str, str], Alarm]:
        if self._open is None:
            qs = Alarm.objects.open().filter(fabric=self.fabric).select_for_update()
            self._open = {(a.code, a.object_key): a for a in qs}
        return self._open

    # -- events ------------------------------------------------------------------------------
    def process_pending(self) -> None:
        """Apply each not-yet-evaluated event of the fabric in id order: its policy's severity, the
        alarms it clears, its alarm (raised or updated) and its mail — to the policy's recipients,
        and to the addresses its writer named in ``details["notify"]`` (a job's tenant contacts)."""
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
            self._syslog_events.append(event)
            for code in policy.clears:
                for alarm in self._matching_open(code, event.object_key, policy.clear_scope):
                    self.clear(alarm, at=event.at, event=event, reason=f"{event.code} ({policy.name})")
            if policy.raise_alarm:
                self.raise_alarm(event, policy)
            elif policy.email:
                self._queue(policy.recipients, NotificationKind.EVENT, event=event)
            # the writer's own contacts for this event (a job's tenant): mailed whatever the
            # policy's recipients, once each
            extra = event.details.get("notify") if isinstance(event.details, dict) else None
            if extra and isinstance(extra, list):
                known = (
                    {r.lower() for r in policy.recipients}
                    if policy.email and not policy.raise_alarm
                    else set()
                )
                self._queue(
                    list({a.lower(): a for a in extra if isinstance(a, str) and "@" in a and a.lower() not in known}.values()),
                    NotificationKind.EVENT, event=event,
                )  # fmt: skip
        Event.objects.bulk_update(pending, ["evaluated"], batch_size=1000)
        if resevered:
            Event.objects.bulk_update(resevered, ["severity"], batch_size=1000)

    def _matching_open(self, code: str, key: str, scope: str) -> list[Alarm]:
        if scope == "fabric":
            return [a for (c, _), a in self.open_alarms.items() if c == code]
        alarm = self.open_alarms.get((code, key))
        return [alarm] if alarm is not None else []

    def raise_alarm(self, event: Event, policy: Policy) -> Alarm:
        """Open the alarm of ``(event.code, event.object_key)`` or raise the open one again
        (count + 1, last_seen, message and details from the event)."""
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
            alarm.tenant_id = event.tenant_id  # whose data the message (the latest event's) carries
            alarm.save(
                update_fields=[
                    "tenant_id",
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
            tenant_id=event.tenant_id,
        )
        self.open_alarms[key] = alarm
        self.outcome.raised.append(alarm)
        if policy.email:
            self._queue(policy.recipients, NotificationKind.RAISED, alarm=alarm)
        self._queue_targets(NotificationKind.RAISED, alarm)
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
        self._queue_targets(NotificationKind.CLEARED, alarm)

    def _queue_targets(self, kind: str, alarm: Alarm) -> None:
        """Outbox rows of a raise or clear for the alert targets it reaches (``events.alerting``)."""
        rows = alerting.notifications_for(self.targets, kind, alarm) if self.targets else []
        self._notifications.extend(rows)
        self.outcome.notifications += len(rows)

    def expire(self, now: datetime) -> None:
        """Clear open alarms whose ``ttl_s`` passed since they were last raised."""
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
        the clearing event (None: clear the alarm without an event). An open alarm clears after
        the policy's ``clear_consecutive`` evaluations in a row that do not hold with a value at
        or below ``threshold × clear_factor`` (a value between that and the threshold keeps it
        open and restarts the count; for rules whose value rises above the threshold). With ``all_keys_measured``, open alarms of ``code`` whose key was not
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
        clear_level = policy.threshold * policy.clear_factor if policy.threshold is not None else float("inf")
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
            elif alarm is not None and value is not None and value > clear_level:
                # Hysteresis: below the threshold but above the clear level neither raises nor
                # clears; the clear streak starts again.
                state.over = state.under = 0
            else:
                state.under += 1
                state.over = 0
                if alarm is not None and state.under >= policy.clear_consecutive:
                    spec = describe(key, False, value, info)
                    if spec is not None:
                        specs.append(spec)
                    else:
                        self.clear(alarm, at=timezone.now(), reason="condition no longer holds")
        ConditionState.objects.bulk_create(new_states)
        if changed:
            ConditionState.objects.bulk_update(changed, ["over", "under", "value"])
        return specs

    def write_events(self, specs: list[EventSpec]) -> None:
        """Record condition events (severity from their policy) and apply them at once."""
        if specs:
            for spec in specs:
                spec.severity = self.policy(spec.code).severity
            record_events(self.fabric, specs)
            self.process_pending()

    def finish(self) -> Outcome:
        """Store the queued mail; on commit, send :data:`alarms_changed` when anything changed."""
        if self._notifications:
            Notification.objects.bulk_create(self._notifications)
        if (self._syslog_events or self.outcome.cleared) and self.targets:
            alerting.queue_syslog(self.targets, self._syslog_events, self.outcome.cleared, self.fabric)
        outcome = self.outcome
        if outcome.raised or outcome.updated or outcome.cleared or outcome.notifications:
            transaction.on_commit(lambda: send_alarms_changed(outcome))
        return outcome


def send_alarms_changed(outcome: Outcome) -> None:
    """Send :data:`alarms_changed` for ``outcome`` (after commit). A failing receiver is logged,
    never raised into the writer that already committed."""
    for receiver, result in alarms_changed.send_robust(sender=AlarmEngine, outcome=outcome):
        if isinstance(result, Exception):
            log.error(
                "alarms_changed receiver %s failed: %s", getattr(receiver, "__name__", receiver), result
            )


def lock_fabric(fabric_id: int):
    """The fabric row, locked for this transaction (``select_for_update``): evaluations of one
    fabric never interleave.

    Raises:
        fabric.models.Fabric.DoesNotExist: unknown ``fabric_id``.
    """

    return Fabric.objects.select_for_update().get(pk=fabric_id)


def process_pending_events(fabric_id: int) -> Outcome:
    """Apply the policies of the fabric's not-yet-evaluated events (one transaction).

    Used after writers outside a discovery or sweep (the SM service, another app) record events.

    Raises:
        fabric.models.Fabric.DoesNotExist: unknown ``fabric_id``.
    """
    with transaction.atomic():
        engine = AlarmEngine(lock_fabric(fabric_id))
        engine.process_pending()
        engine.expire(timezone.now())
        return engine.finish()
