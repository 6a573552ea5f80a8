"""Condition rules over the devices' latest readings, and the application of their events.

``evaluate(fabric_id, device_ids)`` runs after a poll stored its devices: in one transaction on
the fabric (``events.engine.lock_fabric``), the alarm engine first applies the events the poll
wrote (reachability, interface down/up, LLDP links: alarms at once), then these condition rules
through ``AlarmEngine.conditions`` (consecutive evaluations, clear hysteresis and thresholds from
the admin's policies, as the IB counter rules):

* ``device.interface_discards``: (Δ ifInDiscards + Δ ifOutDiscards) per minute over the poll
  interval, ``device.interface_errors`` the same for ifIn/OutErrors;
* ``device.congestion``: the interface's congestion signal (``telemetry.semantics.derive_wrapping``);
* ``device.temperature_high``: temperature sensors (°C) above the threshold;
* ``device.sensor_failed``: fan and PSU sensors reporting nonoperational.

Interfaces without a rate this interval (first sample, reset) and unavailable sensors keep
their streaks. Only the devices of ``device_ids`` are measured (another group's poll measures
its own), and their sensors only where ``sensor_ids`` says the poll read them (every
``WEFT_SNMP_SENSORS_S``): a reading is one evaluation, however many polls it stays stored.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from events.engine import AlarmEngine, Outcome, lock_fabric
from events.services import EventSpec

from ..keys import interface_key, sensor_key
from ..models import Interface, Sensor

#: rule code → (its clearing event's code, object type)
RULES = {
    "device.interface_discards": ("device.interface_discards_cleared", "interface"),
    "device.interface_errors": ("device.interface_errors_cleared", "interface"),
    "device.congestion": ("device.congestion_cleared", "interface"),
    "device.temperature_high": ("device.temperature_cleared", "sensor"),
    "device.sensor_failed": ("device.sensor_ok", "sensor"),
}


def evaluate(fabric_id: int, device_ids: list[int], sensor_ids: list[int] | None = None) -> Outcome:
    """Apply the fabric's pending events, then the condition rules of ``device_ids`` (see the
    module docstring; sensors of ``sensor_ids``, default all of ``device_ids``), in one
    transaction. Returns the engine's outcome.

    Raises:
        fabric.models.Fabric.DoesNotExist: unknown ``fabric_id``.
    """
    with transaction.atomic():
        engine = AlarmEngine(lock_fabric(fabric_id))
        engine.process_pending()
        ifaces = list(
            Interface.objects.filter(device_id__in=device_ids, present=True).select_related("device")
        )
        sensors = list(
            Sensor.objects.filter(
                device_id__in=device_ids if sensor_ids is None else sensor_ids
            ).select_related("device")
        )
        specs: list[EventSpec] = []
        reprs: dict[str, str] = {}

        def describe(code):
            clear_code, otype = RULES[code]
            policy = engine.policy(code)

            def make(key, over, value, info):
                name = reprs.get(key, key)
                if over:
                    msg = info.get("message") or f"{policy.name} on {name}"
                else:
                    msg = f"{policy.name} cleared on {name}"
                return EventSpec(
                    clear_code if not over else code, msg, object_type=otype, object_key=key,
                    object_repr=name, details={"value": value, "threshold": policy.threshold},
                )  # fmt: skip

            return make

        for code, counters in (
            ("device.interface_discards", ("in_discards", "out_discards")),
            ("device.interface_errors", ("in_errors", "out_errors")),
        ):
            threshold = engine.policy(code).threshold or 0.0
            measured = {}
            for i in ifaces:
                key = interface_key(i.device.name, i.name)
                reprs[key] = f"{i.device.name} {i.name}"
                if i.error_deltas is None or not i.interval_s:
                    measured[key] = (None, None, {})
                    continue
                delta = sum(int(i.error_deltas.get(c, 0) or 0) for c in counters)
                value = delta / i.interval_s * 60.0
                msg = f"{engine.policy(code).name} on {reprs[key]}: {value:.1f}/min, threshold {threshold:g}/min"
                measured[key] = (value > threshold, value, {"message": msg})
            specs += engine.conditions(code, measured, describe(code), all_keys_measured=False)

        threshold = engine.policy("device.congestion").threshold or 0.5
        measured = {}
        for i in ifaces:
            key = interface_key(i.device.name, i.name)
            if i.congestion is None:
                measured[key] = (None, None, {})
            else:
                msg = f"Congestion on {reprs[key]}: {i.congestion:.2f} above {threshold:g}"
                measured[key] = (i.congestion > threshold, i.congestion, {"message": msg})
        specs += engine.conditions(
            "device.congestion", measured, describe("device.congestion"), all_keys_measured=False
        )

        threshold = engine.policy("device.temperature_high").threshold or 80.0
        measured, failed = {}, {}
        for s in sensors:
            key = sensor_key(s.device.name, s.index)
            reprs[key] = f"{s.device.name} {s.name}"
            if s.kind == "temperature":
                if s.value is None or s.status != "ok":
                    measured[key] = (None, None, {})
                else:
                    msg = f"{reprs[key]} at {s.value:g} °C, threshold {threshold:g} °C"
                    measured[key] = (s.value > threshold, s.value, {"message": msg})
            if s.component in ("fan", "psu") or s.kind == "fan":
                if s.status == "unavailable":
                    failed[key] = (None, None, {})
                else:
                    down = s.status == "nonoperational"
                    failed[key] = (down, None, {"message": f"{reprs[key]} reports {s.status}"})
        specs += engine.conditions(
            "device.temperature_high", measured, describe("device.temperature_high"), all_keys_measured=False
        )
        specs += engine.conditions(
            "device.sensor_failed", failed, describe("device.sensor_failed"), all_keys_measured=False
        )
        engine.write_events(specs)
        engine.expire(timezone.now())
        return engine.finish()
