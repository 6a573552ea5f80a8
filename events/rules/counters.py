"""Counter rules, after every counter sweep (``events.receivers`` → ``evaluate_sweep_task``)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from telemetry.models import PortCounters, Sweep

from .. import registry
from ..engine import AlarmEngine, Outcome, lock_fabric
from ..keys import port_key
from ..recording import EventSpec

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
    ``port.link_downed``; SymbolErrorCounter and PortRcvErrors rates (errors/min = delta /
    ``Sweep.interval_s`` × 60) above threshold raise; each clears after its policy's
    ``clear_consecutive`` sweeps in a row at or below (``WEFT_COUNTER_CLEAR_SWEEPS``, default 3); the congestion index above threshold for ``consecutive`` sweeps raises and
    a sweep below clears; saturated counters raise and clear when no longer saturated. Ports
    whose rates could not be computed (``error_deltas``/``congestion`` null: first sample,
    reset, PortXmitWait saturated) keep their streaks, and so does a rule whose own counter is
    saturated (per counter: a saturated PortXmitData leaves the error rules their deltas). Per fabric: a failed sweep raises
    ``system.poller_failing`` (an ok/partial sweep clears it); stale ports above threshold
    raise ``fabric.ports_stale``.

    Raises:
        telemetry.models.Sweep.DoesNotExist: unknown ``sweep_id``.
    """

    with transaction.atomic():
        fabric = lock_fabric(fabric_id)
        sweep = Sweep.objects.get(pk=sweep_id, fabric=fabric)
        engine = AlarmEngine(fabric)
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
                # a saturated counter has no delta (IBTA 16.1.3), the port's other counters do
                if row.error_deltas is None or row.stale or counter in (row.saturated or ()):
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
        engine.write_events(specs)
        engine.expire(timezone.now())
        return engine.finish()


def _fabric_sweep_conditions(engine: AlarmEngine, fabric, sweep) -> list[EventSpec]:
    specs: list[EventSpec] = []
    failed = sweep.status == "failed"

    def fabric_spec(over_code: str, clear_code: str, over_msg: str, clear_msg: str, info: dict):
        def describe(key, over, value, _info):
            return EventSpec(
                code=over_code if over else clear_code, message=over_msg if over else clear_msg,
                category=registry.get(over_code).category, object_type="fabric", object_key=key,
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
            .order_by("port__node__name", "port__port_num")[:11]
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
