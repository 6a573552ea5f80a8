"""``/metrics`` families of cables and transceivers (``fabric.CableInfo``: ibdiagnet or mlxlink
readings), one series per port with a reading (and per lane), from each port's latest reading;
selectable as ``collect[]=cables``. Labels ``fabric``, ``guid`` (the port's node GUID), ``port``
(the port number), plus ``lane`` (0-based, as mlxlink lists them); the descriptive values are on
one ``weft_cable_info`` series per port (join with ``group_left``, as ``weft_port_info``):

* ``weft_cable_info{fabric, guid, port, vendor, part, serial, length_m}`` 1 (``length_m`` empty
  when the module does not say);
* ``weft_cable_temperature_celsius`` (the module's sensor) and
  ``weft_cable_temperature_limit_celsius`` (its high alarm threshold, else
  ``WEFT_CABLE_TEMP_MAX_C``: what the ``cable.temperature_high`` alarm compares with);
* ``weft_cable_rx_power_dbm{lane}``, ``weft_cable_tx_power_dbm{lane}``;
* ``weft_cable_effective_ber``, ``weft_cable_raw_ber`` (mlxlink ``-c``);
* ``weft_cable_reading_age_seconds``: seconds since the reading.

A value the reading does not give has no sample. Registered by ``TelemetryConfig.ready()``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from django.conf import settings
from django.db.models import OuterRef, Subquery
from prometheus_client.core import GaugeMetricFamily

L = ["fabric", "guid", "port"]


def _num(value: float) -> str:
    return f"{value:g}"


class CableInfoCollector:
    """The cable families (module docstring); ``fabric_id`` None for every fabric."""

    def __init__(self, fabric_id: int | None = None) -> None:
        self.fabric_id = fabric_id

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator:
        from fabric.models import CableInfo, Port

        newest = CableInfo.objects.filter(port=OuterRef("pk")).order_by("-taken", "-pk").values("pk")[:1]
        ports = Port.objects.filter(cable_readings__isnull=False)
        if self.fabric_id is not None:
            ports = ports.filter(node__fabric_id=self.fabric_id)
        pks = set(ports.annotate(latest=Subquery(newest)).values_list("latest", flat=True))
        rows = (
            CableInfo.objects.filter(pk__in=pks)
            .select_related("port__node__fabric")
            .order_by("port__node__node_guid", "port__port_num")
        )
        info = GaugeMetricFamily("weft_cable_info", "Cable or transceiver in a port (value 1)",
                                 labels=[*L, "vendor", "part", "serial", "length_m"])  # fmt: skip
        temp = GaugeMetricFamily("weft_cable_temperature_celsius", "Transceiver temperature", labels=L)
        limit = GaugeMetricFamily(
            "weft_cable_temperature_limit_celsius", "Temperature at which the transceiver alarms", labels=L
        )
        rx = GaugeMetricFamily(
            "weft_cable_rx_power_dbm", "Transceiver receive power per lane", labels=[*L, "lane"]
        )
        tx = GaugeMetricFamily(
            "weft_cable_tx_power_dbm", "Transceiver transmit power per lane", labels=[*L, "lane"]
        )
        eff = GaugeMetricFamily("weft_cable_effective_ber", "Effective (post-FEC) bit error rate", labels=L)
        raw = GaugeMetricFamily("weft_cable_raw_ber", "Raw (pre-FEC) bit error rate", labels=L)
        age = GaugeMetricFamily("weft_cable_reading_age_seconds", "Seconds since the cable reading", labels=L)
        now, default_limit = time.time(), float(settings.WEFT_CABLE_TEMP_MAX_C)
        for row in rows:
            d, port = row.data, row.port
            key = [port.node.fabric.name, port.node.node_guid, str(port.port_num)]
            length = d.get("length_m")
            info.add_metric([*key, d.get("vendor") or "", d.get("part_number") or "", d.get("serial_number") or "",
                             _num(length) if length is not None else ""], 1.0)  # fmt: skip
            age.add_metric(key, max(0.0, now - row.taken.timestamp()))
            if d.get("temperature_c") is not None:
                temp.add_metric(key, float(d["temperature_c"]))
                hi = d.get("temperature_high_c")
                limit.add_metric(key, float(default_limit if hi is None else hi))
            for lane, value in enumerate(d.get("rx_power_dbm") or []):
                rx.add_metric([*key, str(lane)], float(value))
            for lane, value in enumerate(d.get("tx_power_dbm") or []):
                tx.add_metric([*key, str(lane)], float(value))
            if d.get("effective_ber") is not None:
                eff.add_metric(key, float(d["effective_ber"]))
            if d.get("raw_ber") is not None:
                raw.add_metric(key, float(d["raw_ber"]))
        yield from (info, temp, limit, rx, tx, eff, raw, age)
