"""``/metrics`` families of switch health (``fabric.SwitchHealth``: ``ibswinfo.sh`` readings), one
series per switch (and per fan / PSU), from each switch's latest reading; selectable as
``collect[]=switches``. Labels ``fabric``, ``guid`` (the switch's node GUID), plus ``fan`` / ``psu``
(the number ibswinfo prints); the descriptive values are on one ``weft_switch_info`` series per
switch (join with ``group_left``, as ``weft_port_info``):

* ``weft_switch_info{fabric, guid, switch, part_number, serial_number, firmware}`` 1;
* ``weft_switch_temperature_celsius`` (the ASIC sensor), ``weft_switch_temperature_limit_celsius``
  (the switch's high warning threshold, else ``WEFT_SWITCH_TEMP_MAX_C``: what the
  ``switch.temperature_high`` alarm compares with);
* ``weft_switch_fan_speed_rpm{fan}``, ``weft_switch_fans_ok`` (1 when the chassis fan status is OK
  and no fan is at 0 rpm);
* ``weft_switch_psu_ok{psu}`` (status, DC power and PSU fan all OK), ``weft_switch_psu_power_watts{psu}``;
* ``weft_switch_health_age_seconds``: seconds since the reading.

A value the reading does not give has no sample. Registered by ``TelemetryConfig.ready()``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from django.conf import settings
from django.db.models import OuterRef, Subquery
from prometheus_client.core import GaugeMetricFamily

L = ["fabric", "guid"]


class SwitchHealthCollector:
    """The switch health families (module docstring); ``fabric_id`` None for every fabric."""

    def __init__(self, fabric_id: int | None = None) -> None:
        self.fabric_id = fabric_id

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator:
        from fabric.models import Node, SwitchHealth
        from fabric.services.switchhealth import conditions

        latest = SwitchHealth.objects.filter(node=OuterRef("pk")).order_by("-taken", "-pk").values("pk")[:1]
        nodes = Node.objects.filter(health_readings__isnull=False)
        if self.fabric_id is not None:
            nodes = nodes.filter(fabric_id=self.fabric_id)
        pks = set(nodes.annotate(latest=Subquery(latest)).values_list("latest", flat=True))
        rows = (
            SwitchHealth.objects.filter(pk__in=pks).select_related("node__fabric").order_by("node__node_guid")
        )
        info = GaugeMetricFamily("weft_switch_info", "Switch inventory (value 1)",
                                 labels=[*L, "switch", "part_number", "serial_number", "firmware"])  # fmt: skip
        temp = GaugeMetricFamily("weft_switch_temperature_celsius", "Switch ASIC temperature", labels=L)
        limit = GaugeMetricFamily(
            "weft_switch_temperature_limit_celsius", "Temperature at which the switch alarms", labels=L
        )
        fan = GaugeMetricFamily("weft_switch_fan_speed_rpm", "Switch fan speed", labels=[*L, "fan"])
        fans_ok = GaugeMetricFamily("weft_switch_fans_ok", "1 when the switch's fans are OK", labels=L)
        psu_ok = GaugeMetricFamily("weft_switch_psu_ok", "1 when the PSU is OK", labels=[*L, "psu"])
        power = GaugeMetricFamily("weft_switch_psu_power_watts", "PSU output power", labels=[*L, "psu"])
        age = GaugeMetricFamily(
            "weft_switch_health_age_seconds", "Seconds since the switch's reading", labels=L
        )
        now, default_limit = time.time(), settings.WEFT_SWITCH_TEMP_MAX_C
        for row in rows:
            d, node = row.data, row.node
            key = [node.fabric.name, node.node_guid]
            info.add_metric([*key, str(node), d.get("part_number") or "", d.get("serial_number") or "",
                             d.get("firmware") or ""], 1.0)  # fmt: skip
            age.add_metric(key, max(0.0, now - row.taken.timestamp()))
            cond = conditions(d, default_limit)
            if d.get("temperature_c") is not None:
                temp.add_metric(key, float(d["temperature_c"]))
                limit.add_metric(key, float(d.get("warn_high_c") or default_limit))
            for n, rpm in (d.get("fans") or {}).items():
                fan.add_metric([*key, str(n)], float(rpm))
            if "fans" in cond:
                fans_ok.add_metric(key, 0.0 if cond["fans"].failed else 1.0)
            for p in d.get("psus") or []:
                c = cond.get(f"psu{p['index']}")
                if c is not None:
                    psu_ok.add_metric([*key, str(p["index"])], 0.0 if c.failed else 1.0)
                if p.get("power_w") is not None:
                    power.add_metric([*key, str(p["index"])], float(p["power_w"]))
        yield from (info, temp, limit, fan, fans_ok, psu_ok, power, age)
