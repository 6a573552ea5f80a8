"""Prometheus families of the SNMP devices, served by ``/metrics`` (``telemetry.metrics``;
registered in ``DevicesConfig.ready()``), built from the database on scrape like the IB ones.

Labels: ``fabric``, ``device``; interfaces add ``ifname``, ``ifindex``; sensors ``sensor``,
``kind``, ``unit``. Families: ``weft_device_up`` (1 when the last poll answered),
``weft_device_poll_seconds``, ``weft_device_poll_age_seconds``; counters as read
(``weft_interface_in_bytes_total``, ``..._out_bytes_total``, ``..._in_packets_total``,
``..._out_packets_total``, ``..._in_discards_total``, ``..._out_discards_total``,
``..._in_errors_total``, ``..._out_errors_total``, ``..._pfc_in_frames_total``,
``..._pfc_out_frames_total``: they wrap or reset, Prometheus' ``rate()`` copes with resets only,
so prefer the gauges) and gauges over the last poll interval (``weft_interface_in_bytes_per_second``,
``..._out_bytes_per_second``, ``weft_interface_utilisation_ratio``,
``weft_interface_congestion_ratio``, ``weft_interface_oper_up``); ``weft_sensor_value`` in the
sensor's unit; ``weft_snmp_traps_total{outcome}`` of the running trap receiver.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

_COUNTERS = {
    "in_octets": ("weft_interface_in_bytes", "Octets received (ifHCInOctets, else ifInOctets)"),
    "out_octets": ("weft_interface_out_bytes", "Octets sent (ifHCOutOctets, else ifOutOctets)"),
    "in_pkts": ("weft_interface_in_packets", "Unicast packets received"),
    "out_pkts": ("weft_interface_out_packets", "Unicast packets sent"),
    "in_discards": ("weft_interface_in_discards", "Inbound packets discarded (ifInDiscards)"),
    "out_discards": ("weft_interface_out_discards", "Outbound packets discarded (ifOutDiscards)"),
    "in_errors": ("weft_interface_in_errors", "Inbound packets with errors (ifInErrors)"),
    "out_errors": ("weft_interface_out_errors", "Outbound packets with errors (ifOutErrors)"),
    "pfc_in": ("weft_interface_pfc_in_frames", "PFC frames received (ieee8021PfcIndications)"),
    "pfc_out": ("weft_interface_pfc_out_frames", "PFC frames sent (ieee8021PfcRequests)"),
}
_GAUGES = {
    "in_bytes_per_s": (
        "weft_interface_in_bytes_per_second",
        "Receive rate over the last poll interval, bytes/s",
    ),
    "out_bytes_per_s": (
        "weft_interface_out_bytes_per_second",
        "Send rate over the last poll interval, bytes/s",
    ),
    "utilisation": ("weft_interface_utilisation_ratio", "max(in, out) over the interface speed (0..1)"),
    "congestion": ("weft_interface_congestion_ratio", "PFC pause share, else egress discard share (0..1)"),
}
IF_LABELS = ["fabric", "device", "ifname", "ifindex"]


class DeviceCollector:
    """The SNMP device families (see the module docstring), one query per table."""

    def __init__(self, fabric_id: int | None = None) -> None:
        self.fabric_id = fabric_id

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator:
        from core.cache import get_quietly

        from .models import Device, Interface, Sensor
        from .services.traps import STATS_KEY

        devices = Device.objects.select_related("fabric")
        if self.fabric_id is not None:
            devices = devices.filter(fabric_id=self.fabric_id)
        devices = list(devices)
        up = GaugeMetricFamily(
            "weft_device_up", "1 when the device answered its last poll", labels=["fabric", "device"]
        )
        took = GaugeMetricFamily(
            "weft_device_poll_seconds", "Duration of the last poll", labels=["fabric", "device"]
        )
        age = GaugeMetricFamily(
            "weft_device_poll_age_seconds", "Seconds since the last poll", labels=["fabric", "device"]
        )
        now = time.time()
        by_id = {}
        for d in devices:
            by_id[d.pk] = (d.fabric.name, d.name)
            up.add_metric([d.fabric.name, d.name], 1.0 if d.status == "ok" else 0.0)
            if d.last_poll_s is not None:
                took.add_metric([d.fabric.name, d.name], d.last_poll_s)
            if d.last_poll_at is not None:
                age.add_metric([d.fabric.name, d.name], max(0.0, now - d.last_poll_at.timestamp()))
        yield from (up, took, age)
        counters = {k: CounterMetricFamily(n, h, labels=IF_LABELS) for k, (n, h) in _COUNTERS.items()}
        gauges = {k: GaugeMetricFamily(n, h, labels=IF_LABELS) for k, (n, h) in _GAUGES.items()}
        oper = GaugeMetricFamily("weft_interface_oper_up", "1 when ifOperStatus is up", labels=IF_LABELS)
        rows = Interface.objects.filter(device_id__in=list(by_id), present=True).values_list(
            "device_id", "name", "if_index", "oper_status", "counters", *_GAUGES
        )
        for dev_id, name, idx, status, raw, *values in rows:
            labels = [*by_id[dev_id], name, str(idx)]
            for k, fam in counters.items():
                v = (raw or {}).get(k)
                if v is not None:
                    fam.add_metric(labels, float(v))
            for fam, v in zip(gauges.values(), values, strict=True):
                if v is not None:
                    fam.add_metric(labels, v)
            oper.add_metric(labels, 1.0 if status == "up" else 0.0)
        yield from counters.values()
        yield from gauges.values()
        yield oper
        sensors = GaugeMetricFamily("weft_sensor_value", "ENTITY-SENSOR-MIB reading in its unit",
                                    labels=["fabric", "device", "sensor", "kind", "unit"])  # fmt: skip
        for dev_id, name, kind, unit, value in Sensor.objects.filter(
            device_id__in=list(by_id), value__isnull=False
        ).values_list("device_id", "name", "kind", "unit", "value"):
            sensors.add_metric([*by_id[dev_id], name, kind, unit], value)
        yield sensors
        stats = get_quietly(STATS_KEY)  # Redis down: no trap counters, the scrape still answers
        if stats:
            traps = CounterMetricFamily(
                "weft_snmp_traps", "Notifications the trap receiver handled", labels=["outcome"]
            )
            for outcome, n in stats.items():
                traps.add_metric([outcome], float(n))
            yield traps
